-- voucher_holds: what holds a voucher's uses: its total_limit, used_count and
-- the expiry of its RESERVED hold that expires first (NULL when none; one
-- probe of voucher_redemption_code_expiry_idx).
-- $1 code
SELECT v.total_limit, v.used_count, voucherd_earliest_hold(v.code)
FROM voucher v
WHERE v.code = $1
