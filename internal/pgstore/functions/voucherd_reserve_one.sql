-- voucherd_reserve_one takes one use of p_code for order p_order, or replays the
-- known redemption of p_order. p_code is a voucher's code or a campaign's
-- code: the latter takes its use from the campaign's budget row (voucher
-- row flagged campaign, never reserved by its own code), which stands for
-- the voucher in every step below, and holds the code itself once
-- (CODE_USED while another live redemption holds it). Order of work: cheap reads and rejections
-- first, then the writes in lock order (redemption row, customer counter,
-- voucher row: docs/rules.md), the hot voucher row last so that its row lock
-- is held for as little time as possible. A rejection raises
-- (voucherd_reject) and rolls back everything the call wrote. For a use
-- taken, o_used and o_total are the voucher's used_count right after the
-- take and its total_limit, read under the row lock (threshold events); 0
-- for a replay. A voucher with no free use is HELD_OUT or OUT_OF_STOCK
-- (voucherd_reject_stock). p_currency is the order's currency (NULL: none).
-- A voucher's money budget is decided in step d2 (voucherd_limit_fit),
-- before the insert whose trigger counts it. p_window is the start of the
-- occurrence of the voucher's windows p_now falls in, as the service
-- computed it (NULL: none; a voucher with a schedule then refuses
-- OUTSIDE_WINDOW, after the other reasons); the redemption records it
-- (window_start) and its quota is decided with the money budget in d2.
CREATE OR REPLACE FUNCTION voucherd_reserve_one(
    p_code text, p_customer text, p_order text, p_amount bigint, p_now timestamptz, p_ttl interval,
    p_currency text DEFAULT NULL, p_window timestamptz DEFAULT NULL,
    OUT redemption voucher_redemption, OUT replay boolean, OUT o_used integer, OUT o_total integer)
LANGUAGE plpgsql AS $$
DECLARE
    v voucher%ROWTYPE;
    r voucher_redemption%ROWTYPE;
    v_held integer;
    v_verdict text;
    v_unique text;  -- the campaign code presented, NULL for a voucher
    v_discount bigint;
    v_limited boolean;
BEGIN
    o_used := 0;
    o_total := 0;
    -- a. The voucher (or the campaign code's budget), without a lock.
    SELECT x.* INTO v FROM voucher x WHERE x.code = p_code;
    IF NOT FOUND THEN
        SELECT x.* INTO v FROM voucher x JOIN campaign_code c ON c.campaign_id = x.code WHERE c.code = p_code;
        IF FOUND THEN
            v_unique := p_code;
            -- A code bound to one customer (imported with a customerId)
            -- serves that customer only: the budget's eligibility with it.
            v.bound_customer := (SELECT c.customer FROM campaign_code c WHERE c.code = p_code);
        END IF;
    END IF;
    IF v.code IS NULL OR v.campaign AND v_unique IS NULL THEN
        PERFORM voucherd_reject('VOUCHER_NOT_FOUND', format('voucher=%s', p_code));
    END IF;

    -- b. A known orderId is a replay or a conflict; it takes nothing.
    SELECT x.* INTO r FROM voucher_redemption x WHERE x.order_id = p_order;
    IF FOUND THEN
        v_verdict := voucherd_order_verdict(r, p_code, p_customer);
        IF v_verdict <> '' THEN
            PERFORM voucherd_reject(v_verdict, voucherd_order_facts(r, p_code));
        END IF;
        redemption := r;
        replay := true;
        RETURN;
    END IF;

    -- c. Eligibility with the caller's clock.
    v_verdict := voucherd_eligibility(v, p_amount, p_now, p_customer, p_currency);
    IF v_verdict = '' AND v.schedule IS NOT NULL AND p_window IS NULL THEN
        v_verdict := 'OUTSIDE_WINDOW';
    END IF;
    IF v.schedule IS NULL THEN
        p_window := NULL;
    END IF;
    IF v_verdict <> '' THEN
        PERFORM voucherd_reject('NOT_ELIGIBLE', voucherd_eligibility_facts(v, p_amount, p_currency), v_verdict);
    END IF;

    -- c2. A campaign code held by another order (the insert below re-checks
    -- under the unique index).
    IF v_unique IS NOT NULL AND EXISTS (
        SELECT 1 FROM voucher_redemption x WHERE x.code = v_unique AND x.status <> 'RELEASED') THEN
        PERFORM voucherd_reject('ALREADY_USED', format('voucher=%s', p_code), 'CODE_USED');
    END IF;

    -- d. Sold out as far as the read shows: reject before writing anything.
    IF v.used_count >= v.total_limit THEN
        PERFORM voucherd_reject_stock(v.code, p_now);
    END IF;

    -- d2. The limits counted in money (voucher_limit), locked: the discount
    -- fits, is clipped to what is left, or BUDGET_EXCEEDED. The lock may
    -- have been waited for behind this very orderId (a retry whose first
    -- attempt was committing): p_order is then known, the fit is skipped so
    -- that what the first attempt took does not refuse its retry, and the
    -- insert below finds the order (a replay).
    v_discount := voucherd_discount(v.discount_amount, v.discount_percent_bp, v.max_discount_amount, p_amount);
    PERFORM 1 FROM voucher_limit x WHERE x.voucher_code = v.code
        AND (x.kind <> 'window' OR x.period_start = p_window)
    ORDER BY x.kind, x.period_start FOR NO KEY UPDATE;
    v_limited := FOUND;
    IF voucherd_window_row(v.code, p_window) THEN
        v_limited := true;
    END IF;
    IF v_limited AND NOT EXISTS (SELECT 1 FROM voucher_redemption x WHERE x.order_id = p_order) THEN
        v_discount := voucherd_limit_fit(v.code, v_discount, p_now, p_lock => false, p_window => p_window);
    END IF;

    -- e. The redemption row. Nothing inserted means a concurrent request with
    -- the same orderId, or holding the same campaign code, committed first
    -- (the insert waited for it).
    INSERT INTO voucher_redemption AS x
        (order_id, voucher_code, customer, customer_id, order_amount, discount_amount, status, created_at, updated_at,
         expires_at, code, window_start)
    VALUES (p_order, v.code, p_customer, voucherd_customer_legacy(p_customer), p_amount,
            v_discount, 'RESERVED', p_now, p_now, p_now + p_ttl,
            v_unique, p_window)
    ON CONFLICT DO NOTHING
    RETURNING x.* INTO r;
    IF NOT FOUND THEN
        SELECT x.* INTO r FROM voucher_redemption x WHERE x.order_id = p_order;
        IF NOT FOUND AND v_unique IS NOT NULL THEN
            PERFORM voucherd_reject('ALREADY_USED', format('voucher=%s', p_code), 'CODE_USED');
        END IF;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'VD900', MESSAGE = format('order %s conflicted but is absent', p_order);
        END IF;
        v_verdict := voucherd_order_verdict(r, p_code, p_customer);
        IF v_verdict <> '' THEN
            PERFORM voucherd_reject(v_verdict, voucherd_order_facts(r, p_code));
        END IF;
        redemption := r;
        replay := true;
        RETURN;
    END IF;

    -- f. The customer's counter, conditional on the per-user limit.
    INSERT INTO voucher_customer_usage AS u (voucher_code, customer, customer_id, held)
    VALUES (v.code, p_customer, voucherd_customer_legacy(p_customer), 1)
    ON CONFLICT ON CONSTRAINT voucher_customer_usage_pkey
        DO UPDATE SET held = u.held + 1 WHERE u.held < v.per_user_limit
    RETURNING u.held INTO v_held;
    IF NOT FOUND THEN
        PERFORM voucherd_reject('ALREADY_USED', voucherd_quota_facts(v.code, p_customer, v.per_user_limit));
    END IF;

    -- g. The hot row, last. Its conditions are re-evaluated on the latest
    -- version of the row, so a concurrent PATCH or the last use taken by
    -- another request is seen here.
    UPDATE voucher x SET used_count = x.used_count + 1
    WHERE x.code = v.code
      AND x.used_count < x.total_limit
      AND NOT x.disabled
      AND x.starts_at <= p_now AND p_now < x.ends_at
      AND x.min_order_amount <= p_amount
      AND x.per_user_limit >= v_held
    RETURNING x.used_count, x.total_limit INTO o_used, o_total;
    IF NOT FOUND THEN
        SELECT x.* INTO v FROM voucher x WHERE x.code = v.code;
        v_verdict := voucherd_eligibility(v, p_amount, p_now, p_customer, p_currency);
        IF v_verdict <> '' THEN
            PERFORM voucherd_reject('NOT_ELIGIBLE', voucherd_eligibility_facts(v, p_amount, p_currency), v_verdict);
        END IF;
        IF v.per_user_limit < v_held THEN
            PERFORM voucherd_reject('ALREADY_USED', voucherd_quota_facts(v.code, p_customer, v.per_user_limit));
        END IF;
        -- Our own redemption row is not a hold that may come free.
        PERFORM voucherd_reject_stock(v.code, p_now, p_order);
    END IF;

    redemption := r;
    replay := false;
END
$$;
