-- release_replaced: the order a fenced replacement replaced
-- (Store.AbandonOrder). The gate marked it released when it let the
-- replacement through and has answered for it so since (ORDER_RELEASED to
-- a retry of it, RESERVATION_RELEASED to a confirm), so the replacement
-- stands as made and its new order as released by the fence: the replaced
-- order is released and its use given back, when it is still the
-- customer's RESERVED hold on the voucher (the lock's re-check skips a row
-- confirmed or released meanwhile). Its row is locked already (lock_order).
-- Answers whether it released it.
-- $1 replaced order_id, $2 voucher code (a campaign's id), $3 customer, $4 now
WITH old AS (
    SELECT x.order_id, coalesce(x.code, x.voucher_code) AS code
    FROM voucher_redemption x
    WHERE x.order_id = $1 AND x.voucher_code = $2 AND x.customer = $3 AND x.status = 'RESERVED'
    FOR UPDATE
)
SELECT (voucherd_release(old.code, old.order_id, $4)).released FROM old
