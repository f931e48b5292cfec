-- validate: what reserve would answer, writing nothing (voucherd_validate).
-- $1 code, $2 customer, $3 order_id (NULL: no orderId), $4 order_amount, $5 now,
-- $6 currency (NULL: none), $7 the occurrence's start (NULL: none)
SELECT x.o_discount, x.o_replay FROM voucherd_validate($1, $2, $3, $4, $5, $6, $7) AS x
