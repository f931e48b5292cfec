-- reconcile_marker: the versions of a voucher's counter rows and the
-- voucher row's last locker: the voucher row's xmin and xmax and its money
-- budget's counter row's xmin (primary-key reads, no lock). Every update
-- writes a new version with the writer's xid; every lock leaves the
-- locker's xid (or a multixact) in xmax. So the marker equals a
-- reconcile_stamp taken earlier only when neither row was written, nor the
-- voucher row locked, since.
-- $1 code
SELECT v.xmin::text || '/' || v.xmax::text || '/' || coalesce(b.xmin::text, '')
FROM voucher v
LEFT JOIN voucher_limit b ON b.voucher_code = v.code AND b.kind = 'budget' AND b.period_start = '-infinity'
WHERE v.code = $1
