-- replace: take a use in place of the same customer's RESERVED hold, or
-- replay a known orderId (voucherd_replace); a campaign's answers with its
-- campaign code.
-- $1 code, $2 customer, $3 order_id, $4 replaced order_id, $5 order_amount, $6 now, $7 ttl,
-- $8 currency (NULL: none), $9 the occurrence's start (NULL: none)
SELECT (x.redemption).order_id, coalesce((x.redemption).code, (x.redemption).voucher_code), (x.redemption).customer,
       (x.redemption).order_amount, (x.redemption).discount_amount, (x.redemption).status,
       (x.redemption).created_at, (x.redemption).updated_at, (x.redemption).expires_at,
       x.replay, x.o_used, x.o_total
FROM voucherd_replace($1, $2, $3, $4, $5, $6, $7, $8, $9) AS x
