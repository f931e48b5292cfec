-- voucherd_validate answers whether voucherd_reserve_one, called with the same
-- arguments at p_now, would take a use, and writes nothing (STABLE: a write
-- here is an error). It runs the reads of voucherd_reserve_one in the same
-- order and raises the same rejections (voucherd_reject, VD004 for
-- HELD_OUT), so its answer is the reservation's. A NULL p_order skips the
-- orderId check. o_replay is true when p_order already holds a use of p_code
-- for p_customer (a reservation would replay it; o_discount is then that
-- hold's), else o_discount is the discount a new use would get.
-- It reads without locks: a reservation committed meanwhile may change the
-- answer, as it would change the reservation's. A campaign code is resolved
-- to its budget as voucherd_reserve_one does. p_currency is the order's
-- currency (NULL: none), p_window the occurrence as voucherd_reserve_one
-- takes it.
CREATE OR REPLACE FUNCTION voucherd_validate(
    p_code text, p_customer text, p_order text, p_amount bigint, p_now timestamptz,
    p_currency text DEFAULT NULL, p_window timestamptz DEFAULT NULL,
    OUT o_discount bigint, OUT o_replay boolean)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v voucher%ROWTYPE;
    r voucher_redemption%ROWTYPE;
    v_held integer;
    v_verdict text;
    v_unique text;
BEGIN
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

    IF p_order IS NOT NULL THEN
        SELECT x.* INTO r FROM voucher_redemption x WHERE x.order_id = p_order;
        IF FOUND THEN
            v_verdict := voucherd_order_verdict(r, p_code, p_customer);
            IF v_verdict <> '' THEN
                PERFORM voucherd_reject(v_verdict, voucherd_order_facts(r, p_code));
            END IF;
            o_discount := r.discount_amount;
            o_replay := true;
            RETURN;
        END IF;
    END IF;

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

    IF v_unique IS NOT NULL AND EXISTS (
        SELECT 1 FROM voucher_redemption x WHERE x.code = v_unique AND x.status <> 'RELEASED') THEN
        PERFORM voucherd_reject('ALREADY_USED', format('voucher=%s', p_code), 'CODE_USED');
    END IF;

    IF v.used_count >= v.total_limit THEN
        PERFORM voucherd_reject_stock(v.code, p_now);
    END IF;

    -- The money budget, read without a lock: BUDGET_EXCEEDED, or the
    -- discount clipped to what is left.
    o_discount := voucherd_limit_fit(v.code,
        voucherd_discount(v.discount_amount, v.discount_percent_bp, v.max_discount_amount, p_amount), p_now, NULL, false, p_window);

    SELECT u.held INTO v_held FROM voucher_customer_usage u
    WHERE u.voucher_code = v.code AND u.customer = p_customer;
    IF coalesce(v_held, 0) >= v.per_user_limit THEN
        PERFORM voucherd_reject('ALREADY_USED', voucherd_quota_facts(v.code, p_customer, v.per_user_limit));
    END IF;

    o_replay := false;
END
$$;
