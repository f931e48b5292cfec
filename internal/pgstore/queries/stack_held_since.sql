-- stack_held_since: the members of a replacing stack continue the hold
-- they replace (held_since; the limit counters do not move).
-- $1 member order_ids, $2 held_since
UPDATE voucher_redemption SET held_since = $2 WHERE order_id = ANY($1::text[])
