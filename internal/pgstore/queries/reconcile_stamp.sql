-- reconcile_stamp: what reconcile_counts' marker reads as long as nobody
-- writes or locks the voucher row, nor writes its money budget's counter
-- row, after this statement: the voucher row's xmin and this statement's
-- own xid, left in the row's xmax by its lock. The lock conflicts with
-- every other (a redemption's insert takes KEY SHARE through its foreign
-- key), so no writer that locked the row before it is still running, and
-- any writer after it leaves another xmax or xmin. NOWAIT: a row locked
-- now fails with 55P03 at once (the caller then has no stamp) instead of
-- queueing behind the voucher's writers.
-- $1 code
SELECT v.xmin::text || '/' || (pg_current_xact_id()::text::bigint % 4294967296)::text || '/' || coalesce(b.xmin::text, '')
FROM voucher v
LEFT JOIN voucher_limit b ON b.voucher_code = v.code AND b.kind = 'budget' AND b.period_start = '-infinity'
WHERE v.code = $1
FOR UPDATE OF v NOWAIT
