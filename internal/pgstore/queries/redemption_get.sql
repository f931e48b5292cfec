-- redemption_get: one redemption of a voucher, or of a campaign code.
-- $1 code, $2 order_id
SELECT order_id, coalesce(code, voucher_code), customer, order_amount, discount_amount, status, created_at, updated_at, expires_at
FROM voucher_redemption
WHERE order_id = $2 AND coalesce(code, voucher_code) = $1
