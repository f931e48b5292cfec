-- voucher_windows_cap: a new quota for the occurrences of a voucher (their
-- rows are locked); an occurrence already holding more keeps what it holds
-- as its cap (only an ended one can: the current one is checked first).
-- $1 code, $2 window_limit
UPDATE voucher_limit SET cap = greatest($2::bigint, held)
WHERE voucher_code = $1 AND kind = 'window'
