-- voucher_budget_update: a new amount for a voucher's money budget (its row
-- is locked; voucher_limit_held_le_cap refuses one below what is held).
-- $1 code, $2 amount
UPDATE voucher_limit SET cap = $2
WHERE voucher_code = $1 AND kind = 'budget' AND period_start = '-infinity'
