-- voucher_update: write the settings of a patched voucher (the row is locked).
-- $1 code, $2 discount_amount, $3 min_order_amount, $4 total_limit,
-- $5 per_user_limit, $6 starts_at, $7 ends_at, $8 flash_sale, $9 disabled
UPDATE voucher
SET discount_amount = $2, min_order_amount = $3, total_limit = $4, per_user_limit = $5,
    starts_at = $6, ends_at = $7, flash_sale = $8, disabled = $9, updated_at = now()
WHERE code = $1
RETURNING code, discount_amount, min_order_amount, total_limit, per_user_limit, starts_at, ends_at, flash_sale,
          used_count, created_at, updated_at, disabled
