-- reserve_batch: take uses of one voucher for many orders in one transaction
-- (voucherd_reserve_batch); one row per element, o_n its 1-based position.
-- $1 code, $2 customers, $3 order_ids, $4 order_amounts, $5 nows, $6 ttl,
-- $7 currencies (NULL elements: none)
SELECT o_order_id, o_voucher_code, o_customer, o_order_amount, o_discount_amount, o_status,
       o_created_at, o_updated_at, o_expires_at, o_replay, o_error, o_reason, o_message, o_n,
       o_retry_ms, o_used, o_total
FROM voucherd_reserve_batch($1, $2::text[], $3::text[], $4::bigint[], $5::timestamptz[], $6, $7::text[])
