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
CREATE OR REPLACE FUNCTION voucherd_limit_fit(
    p_code text, p_discount bigint, p_now timestamptz, p_except text DEFAULT NULL, p_lock boolean DEFAULT true)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    l voucher_limit%ROWTYPE;
    v_left bigint;
    v_hold timestamptz;
    v_discount bigint := p_discount;
BEGIN
    IF p_lock THEN
        PERFORM 1 FROM voucher_limit x WHERE x.voucher_code = p_code
        ORDER BY x.kind, x.period_start FOR NO KEY UPDATE;
    END IF;
    -- Read after the lock (a statement of its own): the latest versions.
    FOR l IN SELECT x.* FROM voucher_limit x WHERE x.voucher_code = p_code
             ORDER BY x.kind, x.period_start LOOP
        v_left := l.cap - l.held;
        CONTINUE WHEN v_left > 0 AND voucherd_limit_weight(l.kind, 'RESERVED', v_discount) <= v_left;
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
