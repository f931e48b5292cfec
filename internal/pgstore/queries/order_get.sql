-- order_get: the redemption of an orderId, whatever its voucher.
-- $1 order_id
SELECT order_id, voucher_code, customer_id, order_amount, discount_amount, status, created_at, updated_at, expires_at
FROM voucher_redemption
WHERE order_id = $1
