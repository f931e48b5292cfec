-- campaign_budget_insert: a campaign's budget, a voucher row flagged
-- campaign whose code is the campaign id; used_count starts at 0.
-- $1 id, $2 discount_amount, $3 min_order_amount, $4 total_limit,
-- $5 per_user_limit, $6 starts_at, $7 ends_at
INSERT INTO voucher (code, discount_amount, min_order_amount, total_limit, per_user_limit, starts_at, ends_at, flash_sale,
                     disabled, campaign)
VALUES ($1, $2, $3, $4, $5, $6, $7, false, false, true)
RETURNING code, discount_amount, min_order_amount, total_limit, per_user_limit, starts_at, ends_at, flash_sale,
          used_count, created_at, updated_at, disabled, 0, 0
