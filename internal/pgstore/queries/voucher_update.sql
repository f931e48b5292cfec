-- voucher_update: write the settings of a patched voucher (the row is locked).
-- The discount is $2 (fixed) or $10 (basis points) with the cap $11; 0
-- stores NULL.
-- $1 code, $2 discount_amount, $3 min_order_amount, $4 total_limit,
-- $5 per_user_limit, $6 starts_at, $7 ends_at, $8 flash_sale, $9 disabled,
-- $10 discount_percent_bp, $11 max_discount_amount
UPDATE voucher
SET discount_amount = nullif($2::bigint, 0), min_order_amount = $3, total_limit = $4, per_user_limit = $5,
    starts_at = $6, ends_at = $7, flash_sale = $8, disabled = $9, updated_at = now(),
    discount_percent_bp = nullif($10::integer, 0), max_discount_amount = nullif($11::bigint, 0)
WHERE code = $1
RETURNING code, coalesce(discount_amount, 0), min_order_amount, total_limit, per_user_limit, starts_at, ends_at, flash_sale,
          used_count, created_at, updated_at, disabled, coalesce(discount_percent_bp, 0), coalesce(max_discount_amount, 0),
          customer_id_normalization, coalesce(currency, ''), coalesce(bound_customer, '')
