-- voucher_stacking_set: set a voucher's stacking setting ($2 false
-- removes it).
-- $1 code, $2 stackable, $3 exclusive group ('' for none)
WITH gone AS (
    DELETE FROM voucher_stacking WHERE voucher_code = $1 AND NOT $2
)
INSERT INTO voucher_stacking (voucher_code, exclusive_group)
SELECT $1, nullif($3, '') WHERE $2
ON CONFLICT (voucher_code) DO UPDATE SET exclusive_group = excluded.exclusive_group
