-- lock_order: locks an orderId's row, if it has one, for the rest of the
-- transaction (Store.AbandonOrder locks the order a replacement replaced
-- before it inserts the new order's row: the lock order of voucherd_replace
-- and voucherd_apply_replace_code).
-- $1 order_id
SELECT 1 FROM voucher_redemption x WHERE x.order_id = $1 FOR UPDATE
