-- voucher_budget_insert: the money budget of a voucher just created (it holds
-- nothing yet).
-- $1 code, $2 amount, $3 clip
INSERT INTO voucher_limit (voucher_code, kind, cap, clip) VALUES ($1, 'budget', $2, $3)
