-- abandon_order: fence a gate hold whose write has not reached the
-- database (Store.AbandonOrder): a Kafka event not applied yet, or a
-- flash-sync write whose outcome was unknown or whose instance died. A
-- RELEASED row for the orderId, unless it has a row already: a write that
-- may still arrive then changes nothing (its insert meets the row and takes
-- no use); one in progress is waited for by the insert.
-- Answers the orderId's row and whether this call inserted it; no row when
-- a conflicting row committed after the statement's snapshot.
-- A campaign's hold records its campaign code ($9), as every redemption of
-- a campaign does.
-- $1 order_id, $2 code, $3 customer, $4 order_amount, $5 discount_amount,
-- $6 reserved_at, $7 expires_at, $8 now, $9 campaign code ('' for a voucher)
WITH ins AS (
    INSERT INTO voucher_redemption AS x
        (order_id, voucher_code, customer, customer_id, order_amount, discount_amount, status, created_at, updated_at,
         expires_at, code)
    VALUES ($1, $2, $3, voucherd_customer_legacy($3), $4, $5, 'RELEASED', $6, $8, $7, nullif($9::text, ''))
    ON CONFLICT ON CONSTRAINT voucher_redemption_pkey DO NOTHING
    RETURNING x.order_id, x.voucher_code, x.customer, x.order_amount, x.discount_amount, x.status,
              x.created_at, x.updated_at, x.expires_at
)
SELECT ins.*, true FROM ins
UNION ALL
SELECT r.order_id, r.voucher_code, r.customer, r.order_amount, r.discount_amount, r.status,
       r.created_at, r.updated_at, r.expires_at, false
FROM voucher_redemption r
WHERE r.order_id = $1 AND NOT EXISTS (SELECT 1 FROM ins)
