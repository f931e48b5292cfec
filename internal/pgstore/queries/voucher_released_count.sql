-- voucher_released_count: how many of a voucher's redemptions are RELEASED
-- (the live sale view; RESERVED and CONFIRMED are counted in the voucher row).
-- $1 code
SELECT count(*) FROM voucher_redemption WHERE voucher_code = $1 AND status = 'RELEASED'
