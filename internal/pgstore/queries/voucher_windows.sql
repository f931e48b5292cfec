-- voucher_windows: a voucher's recurring windows (NULL: none), its quota
-- per occurrence (0: none) and the counter of its latest occurrence that
-- has one (NULL start: none yet).
-- $1 code
SELECT v.schedule, coalesce(v.window_limit, 0), w.period_start, coalesce(w.held, 0)::integer
FROM voucher v
LEFT JOIN LATERAL (
    SELECT l.period_start, l.held FROM voucher_limit l
    WHERE l.voucher_code = v.code AND l.kind = 'window'
    ORDER BY l.period_start DESC LIMIT 1
) w ON true
WHERE v.code = $1
