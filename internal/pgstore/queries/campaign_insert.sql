-- campaign_insert: a campaign row, for the budget campaign_budget_insert
-- created.
-- $1 id, $2 name, $3 code_prefix, $4 code_length
INSERT INTO campaign (id, name, code_prefix, code_length) VALUES ($1, $2, $3, $4)
