-- voucher_insert: create a voucher; used_count starts at 0. The discount
-- is $2 (fixed) or $10 (basis points) with the cap $11; 0 stores NULL.
-- $1 code, $2 discount_amount, $3 min_order_amount, $4 total_limit,
-- $5 per_user_limit, $6 starts_at, $7 ends_at, $8 flash_sale, $9 disabled,
-- $10 discount_percent_bp, $11 max_discount_amount, $12 customer_id_normalization,
-- $13 currency, $14 bound_customer ('' stores NULL)
INSERT INTO voucher (code, discount_amount, min_order_amount, total_limit, per_user_limit, starts_at, ends_at, flash_sale,
                     disabled, discount_percent_bp, max_discount_amount, customer_id_normalization, currency, bound_customer)
VALUES ($1, nullif($2::bigint, 0), $3, $4, $5, $6, $7, $8, $9, nullif($10::integer, 0), nullif($11::bigint, 0), $12,
        nullif($13::text, ''), nullif($14::text, ''))
RETURNING code, coalesce(discount_amount, 0), min_order_amount, total_limit, per_user_limit, starts_at, ends_at, flash_sale,
          used_count, created_at, updated_at, disabled, coalesce(discount_percent_bp, 0), coalesce(max_discount_amount, 0),
          customer_id_normalization, coalesce(currency, ''), coalesce(bound_customer, ''), 0, 0
