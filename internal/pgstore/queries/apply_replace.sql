-- apply_replace: write one gate replacement (voucherd_apply_replace_code).
-- $1 order_id, $2 code, $3 customer, $4 order_amount, $5 discount_amount,
-- $6 reserved_at, $7 expires_at, $8 replaced order_id, $9 campaign code
-- ('' for a voucher's event), $10 the occurrence's start (NULL: none)
SELECT x.o_inserted, x.o_voucher_code, x.o_customer
FROM voucherd_apply_replace_code($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) AS x
