-- expire: release due RESERVED redemptions (voucherd_expire).
-- $1 now, $2 limit
SELECT order_id, voucher_code, customer, order_amount, discount_amount, status, created_at, updated_at, expires_at
FROM voucherd_expire($1, $2)
