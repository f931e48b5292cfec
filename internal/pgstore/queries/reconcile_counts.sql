-- reconcile_counts: what reconciliation compares with the gate's counters,
-- in one statement: the voucher's total_limit and used_count, its money
-- budget's cap and held (zeros: none), and the start and held uses of each
-- occurrence whose counter holds some (voucher_limit's primary key).
-- $1 code
SELECT v.total_limit, v.used_count, coalesce(b.cap, 0), coalesce(b.held, 0),
       coalesce(w.starts, '{}'), coalesce(w.held, '{}')
FROM voucher v
LEFT JOIN voucher_limit b ON b.voucher_code = v.code AND b.kind = 'budget' AND b.period_start = '-infinity'
LEFT JOIN LATERAL (
    SELECT array_agg(l.period_start ORDER BY l.period_start) AS starts,
           array_agg(l.held ORDER BY l.period_start) AS held
    FROM voucher_limit l
    WHERE l.voucher_code = v.code AND l.kind = 'window' AND l.held > 0
) w ON true
WHERE v.code = $1
