-- reserve: take one use, or replay a known orderId (voucherd_reserve_one).
-- $1 code, $2 customer, $3 order_id, $4 order_amount, $5 now, $6 ttl,
-- $7 currency (NULL: none), $8 the occurrence's start (NULL: none)
-- o_used and o_total: the voucher's used_count right after a take and its
-- total_limit (0 for a replay).
SELECT (x.redemption).order_id, coalesce((x.redemption).code, (x.redemption).voucher_code), (x.redemption).customer,
       (x.redemption).order_amount, (x.redemption).discount_amount, (x.redemption).status,
       (x.redemption).created_at, (x.redemption).updated_at, (x.redemption).expires_at,
       x.replay, x.o_used, x.o_total
FROM voucherd_reserve_one($1, $2, $3, $4, $5, $6, $7, $8) AS x
