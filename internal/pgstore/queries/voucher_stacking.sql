-- voucher_stacking: a voucher's stacking setting; no row: not stackable.
-- $1 code
SELECT coalesce(exclusive_group, '') FROM voucher_stacking WHERE voucher_code = $1
