-- campaign_budget_insert: a campaign's budget, a voucher row flagged
-- campaign whose code is the campaign id; used_count starts at 0. The
-- discount is $2 (fixed) or $8 (basis points) with the cap $9; 0 stores
-- NULL (as voucher_insert).
-- $1 id, $2 discount_amount, $3 min_order_amount, $4 total_limit,
-- $5 per_user_limit, $6 starts_at, $7 ends_at, $8 discount_percent_bp,
-- $9 max_discount_amount, $10 flash_sale, $11 currency ('' stores NULL)
INSERT INTO voucher (code, discount_amount, min_order_amount, total_limit, per_user_limit, starts_at, ends_at, flash_sale,
                     disabled, discount_percent_bp, max_discount_amount, campaign, currency)
VALUES ($1, nullif($2::bigint, 0), $3, $4, $5, $6, $7, $10, false, nullif($8::integer, 0), nullif($9::bigint, 0), true,
        nullif($11::text, ''))
RETURNING code, coalesce(discount_amount, 0), min_order_amount, total_limit, per_user_limit, starts_at, ends_at, flash_sale,
          used_count, created_at, updated_at, disabled, coalesce(discount_percent_bp, 0), coalesce(max_discount_amount, 0),
          customer_id_normalization, coalesce(currency, ''), coalesce(bound_customer, ''), 0, 0
