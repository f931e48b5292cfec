-- voucher_windows_lock: the counters of a voucher's occurrences under NO
-- KEY UPDATE row locks, sorted, taken before the voucher row's (the lock
-- order of reservations: limit rows, then the voucher row).
-- $1 code
SELECT l.period_start, l.held FROM voucher_limit l
WHERE l.voucher_code = $1 AND l.kind = 'window'
ORDER BY l.period_start
FOR NO KEY UPDATE
