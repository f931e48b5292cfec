-- extend: push a RESERVED hold's expiry forward, or release an expired one
-- (voucherd_extend).
-- $1 code, $2 order_id, $3 now, $4 until, $5 max total hold
SELECT (x.redemption).order_id, coalesce((x.redemption).code, (x.redemption).voucher_code), (x.redemption).customer,
       (x.redemption).order_amount, (x.redemption).discount_amount, (x.redemption).status,
       (x.redemption).created_at, (x.redemption).updated_at, (x.redemption).expires_at,
       x.expired
FROM voucherd_extend($1, $2, $3, $4, $5) AS x
