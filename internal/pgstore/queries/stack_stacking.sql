-- stack_stacking: the stacking settings of codes (a code without a row is
-- not stackable).
-- $1 codes
SELECT voucher_code, coalesce(exclusive_group, '') FROM voucher_stacking WHERE voucher_code = ANY($1::text[])
