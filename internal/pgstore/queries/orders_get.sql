-- orders_get: the redemptions of several orderIds, whatever their vouchers
-- (Order combines concurrent lookups into this one statement); a campaign
-- redemption answers with its campaign code.
-- $1 order_ids
SELECT order_id, coalesce(code, voucher_code), customer, order_amount, discount_amount, status, created_at, updated_at, expires_at, held_since
FROM voucher_redemption
WHERE order_id = ANY($1::text[])
