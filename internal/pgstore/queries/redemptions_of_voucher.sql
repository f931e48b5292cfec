-- redemptions_of_voucher: every redemption of a voucher, held or released;
-- a campaign budget's answers with the campaign code it was made with;
-- window_start names the occurrence of the voucher's windows it was taken in.
-- $1 code
SELECT order_id, coalesce(code, voucher_code), customer, order_amount, discount_amount, status, created_at, updated_at, expires_at, held_since,
       window_start
FROM voucher_redemption
WHERE voucher_code = $1
ORDER BY created_at, order_id
