-- voucherd_limit_count_rows is the statement triggers
-- voucher_redemption_limits_insert and voucher_redemption_limits_delete
-- (migration 021): once per statement that inserts or deletes redemptions,
-- it moves every voucher_limit counter of their vouchers by what the rows
-- weigh (voucherd_limit_weight; inserted rows add, deleted rows take away),
-- as voucherd_limit_count does for a row whose update changes its weight.
-- A limit kind whose rows a redemption is matched to by more than its
-- voucher must be matched here as it is there: a 'window' row counts the
-- redemptions taken in its occurrence (window_start) only. A counter pushed over its
-- cap fails the statement with voucher_limit_held_le_cap (23514). The
-- counters are locked sorted by (voucher, kind, period), after the
-- statement's redemption rows (the lock order of docs/rules.md); a
-- statement whose vouchers have no limit row costs that one read. While
-- voucherd.limits_by_caller is on (set by voucherd_reserve_batch and
-- voucherd_expire for their own writes, which they count themselves) it
-- does nothing.
CREATE OR REPLACE FUNCTION voucherd_limit_count_rows()
RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_sign integer := CASE TG_OP WHEN 'DELETE' THEN -1 ELSE 1 END;
BEGIN
    IF current_setting('voucherd.limits_by_caller', true) = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM 1 FROM voucher_limit l
    WHERE l.voucher_code IN (SELECT n.voucher_code FROM voucherd_limit_rows n WHERE n.status <> 'RELEASED')
      AND (l.kind <> 'window' OR l.period_start IN (
               SELECT n.window_start FROM voucherd_limit_rows n
               WHERE n.voucher_code = l.voucher_code AND n.status <> 'RELEASED'))
    ORDER BY l.voucher_code COLLATE "C", l.kind, l.period_start
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    UPDATE voucher_limit l SET held = l.held + v_sign * d.weight
    FROM (SELECT x.voucher_code, x.kind, x.period_start,
                 sum(voucherd_limit_weight(x.kind, n.status, n.discount_amount)) AS weight
          FROM voucherd_limit_rows n JOIN voucher_limit x ON x.voucher_code = n.voucher_code
              AND (x.kind <> 'window' OR x.period_start = n.window_start)
          GROUP BY x.voucher_code, x.kind, x.period_start) d
    WHERE l.voucher_code = d.voucher_code AND l.kind = d.kind AND l.period_start = d.period_start
      AND d.weight <> 0;
    RETURN NULL;
END
$$;
