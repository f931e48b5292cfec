-- voucherd_limit_fit locks the limit rows of voucher p_code (sorted, in lock
-- order: before the caller inserts its redemption, whose trigger
-- voucherd_limit_count then counts it without waiting; p_lock false reads
-- them without a lock, for voucherd_validate, or under the lock the caller
-- took, for voucherd_reserve_one) and returns the
-- discount a new hold of p_discount may take: p_discount when it fits every
-- limit, what is left of a clipping limit when it does not (never 0),
-- else it raises BUDGET_EXCEEDED (VD001) with the facts: budget = what is
-- left, retry = the milliseconds until the earliest RESERVED hold other than
-- p_except expires, when there is one (its release may free enough). A
-- limit fits a hold while something is left of it and the hold's weight is
-- at most that: an exhausted budget refuses even a discount of 0.
-- p_window is the start of the occurrence of the voucher's windows the hold
-- is taken in (NULL: none); of the 'window' rows only that occurrence's
-- counts. With p_lock, its row is created first (cap: voucher.window_limit)
-- when the voucher has a quota per window, after the other rows' locks (its
-- key sorts after them: the current occurrence is the latest). A full
-- occurrence is HELD_OUT while one of its RESERVED holds other than
-- p_except may expire (VD004, as voucherd_reject_stock), else OUT_OF_STOCK;
-- both with the fact window=1.
CREATE OR REPLACE FUNCTION voucherd_limit_fit(
    p_code text, p_discount bigint, p_now timestamptz, p_except text DEFAULT NULL, p_lock boolean DEFAULT true,
    p_window timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    l voucher_limit%ROWTYPE;
    v_left bigint;
    v_hold timestamptz;
    v_discount bigint := p_discount;
BEGIN
    IF p_lock THEN
        PERFORM 1 FROM voucher_limit x WHERE x.voucher_code = p_code
            AND (x.kind <> 'window' OR x.period_start = p_window)
        ORDER BY x.kind, x.period_start FOR NO KEY UPDATE;
        PERFORM voucherd_window_row(p_code, p_window);
    END IF;
    -- Read after the lock (a statement of its own): the latest versions.
    FOR l IN SELECT x.* FROM voucher_limit x WHERE x.voucher_code = p_code
                 AND (x.kind <> 'window' OR x.period_start = p_window)
             ORDER BY x.kind, x.period_start LOOP
        v_left := l.cap - l.held;
        CONTINUE WHEN v_left > 0 AND voucherd_limit_weight(l.kind, 'RESERVED', v_discount) <= v_left;
        IF l.kind = 'window' THEN
            v_hold := (SELECT min(x.expires_at) FROM voucher_redemption x
                       WHERE x.voucher_code = p_code AND x.status = 'RESERVED' AND x.window_start = p_window
                         AND x.order_id IS DISTINCT FROM p_except);
            IF v_hold IS NULL THEN
                PERFORM voucherd_reject('OUT_OF_STOCK', format('voucher=%s window=1', p_code));
            END IF;
            RAISE EXCEPTION USING ERRCODE = 'VD004', MESSAGE = 'HELD_OUT', DETAIL = format('voucher=%s window=1', p_code),
                HINT = voucherd_retry_ms(v_hold, p_now)::text;
        END IF;
        IF l.kind = 'budget' AND l.clip AND v_left > 0 THEN
            v_discount := v_left;
            CONTINUE;
        END IF;
        v_hold := voucherd_earliest_hold(p_code, p_except);
        PERFORM voucherd_reject('BUDGET_EXCEEDED', format('voucher=%s budget=%s', p_code, greatest(v_left, 0))
            || CASE WHEN v_hold IS NULL THEN '' ELSE format(' retry=%s', voucherd_retry_ms(v_hold, p_now)) END);
    END LOOP;
    RETURN v_discount;
END
$$;
