-- voucher_budget_lock: the counter of a voucher's money budget under a NO
-- KEY UPDATE row lock, taken before the voucher row's (the lock order of
-- reservations: limit rows, then the voucher row).
-- $1 code
SELECT l.held FROM voucher_limit l
WHERE l.voucher_code = $1 AND l.kind = 'budget' AND l.period_start = '-infinity'
FOR NO KEY UPDATE
