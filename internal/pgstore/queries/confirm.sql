-- confirm: RESERVED -> CONFIRMED, or release an expired reservation
-- (voucherd_confirm).
-- $1 code, $2 order_id, $3 now
SELECT (x.redemption).order_id, coalesce((x.redemption).code, (x.redemption).voucher_code), (x.redemption).customer,
       (x.redemption).order_amount, (x.redemption).discount_amount, (x.redemption).status,
       (x.redemption).created_at, (x.redemption).updated_at, (x.redemption).expires_at,
       x.expired
FROM voucherd_confirm($1, $2, $3) AS x
