-- voucher_windows_set: a voucher's recurring windows and quota per
-- occurrence (0 stores NULL).
-- $1 code, $2 schedule (jsonb, NULL: none), $3 window_limit
UPDATE voucher SET schedule = $2, window_limit = nullif($3::integer, 0) WHERE code = $1
