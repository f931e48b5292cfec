-- voucherd_replace takes a use of p_code for order p_order in place of
-- p_replaces, the same customer's RESERVED hold on p_code, in one
-- transaction: p_replaces becomes RELEASED and p_order RESERVED, and
-- neither the voucher's used_count nor the customer's counter moves, so no
-- other reservation can take the use in between. p_code may be a campaign
-- code, as in voucherd_reserve_one: the budget then stands for the voucher,
-- p_replaces is the customer's hold on the campaign (with any of its codes),
-- whose code comes free, and p_order holds p_code (CODE_USED when an order
-- other than p_replaces holds it). A known p_order is
-- answered as voucherd_reserve_one answers it (a replay of an earlier
-- replacement included). p_replaces not being that hold is
-- REPLACED_ORDER_NOT_HELD; p_order not eligible is NOT_ELIGIBLE; both roll
-- back and leave p_replaces held; p_order known once the lock on p_replaces
-- is granted (a retry that waited behind its own first attempt) is a
-- replay again. Lock order as voucherd_reserve_one: the
-- redemption rows (p_replaces first, under FOR UPDATE, which also orders
-- it against a concurrent release, confirm or expiry), the customer's
-- counter, the voucher row last. o_used and o_total are 0: no use was taken
-- from the stock. p_order's hold continues p_replaces's: its held_since is
-- p_replaces's (the caller bounds p_ttl by it and the longest hold).
-- p_currency is the order's currency (NULL: none); p_window the occurrence
-- the new hold is taken in, as voucherd_reserve_one takes it (the replaced
-- hold's use goes back to its own occurrence).
CREATE OR REPLACE FUNCTION voucherd_replace(
    p_code text, p_customer text, p_order text, p_replaces text, p_amount bigint, p_now timestamptz,
    p_ttl interval, p_currency text DEFAULT NULL, p_window timestamptz DEFAULT NULL,
    OUT redemption voucher_redemption, OUT replay boolean, OUT o_used integer, OUT o_total integer)
LANGUAGE plpgsql AS $$
DECLARE
    v voucher%ROWTYPE;
    r voucher_redemption%ROWTYPE;
    old voucher_redemption%ROWTYPE;
    v_verdict text;
    v_unique text;  -- the campaign code presented, NULL for a voucher
BEGIN
    o_used := 0;
    o_total := 0;
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

    -- A known orderId: a replay (of this replacement, once it committed),
    -- a conflict or released, whatever p_replaces is now.
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

    SELECT x.* INTO old FROM voucher_redemption x WHERE x.order_id = p_replaces FOR UPDATE;
    IF NOT FOUND OR old.voucher_code <> v.code OR old.customer <> p_customer OR old.status <> 'RESERVED' THEN
        -- The lock may have been waited for behind this very replacement
        -- (a retry whose first attempt was committing): p_order is known
        -- now, and a retry is answered as such, not as a refusal.
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
        PERFORM voucherd_reject('REPLACED_ORDER_NOT_HELD',
            format('voucher=%s order=%s customer=%s', p_code, p_replaces, p_customer));
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
        SELECT 1 FROM voucher_redemption x
        WHERE x.code = v_unique AND x.status <> 'RELEASED' AND x.order_id <> p_replaces) THEN
        PERFORM voucherd_reject('ALREADY_USED', format('voucher=%s', p_code), 'CODE_USED');
    END IF;

    -- p_replaces first, so that its code (p_code itself, maybe) is free for
    -- p_order; put back as it was when p_order cannot be inserted.
    -- Its discount goes back to the money budget first (the trigger), so
    -- the new one is fitted against what the replaced hold leaves.
    UPDATE voucher_redemption x SET status = 'RELEASED', updated_at = p_now WHERE x.order_id = p_replaces;
    INSERT INTO voucher_redemption AS x
        (order_id, voucher_code, customer, customer_id, order_amount, discount_amount, status, created_at, updated_at,
         expires_at, code, held_since, window_start)
    VALUES (p_order, v.code, p_customer, voucherd_customer_legacy(p_customer), p_amount,
            voucherd_limit_fit(v.code,
                voucherd_discount(v.discount_amount, v.discount_percent_bp, v.max_discount_amount, p_amount), p_now,
                p_window => p_window),
            'RESERVED', p_now, p_now, p_now + p_ttl,
            v_unique, coalesce(old.held_since, old.created_at), p_window)
    ON CONFLICT DO NOTHING
    RETURNING x.* INTO r;
    IF NOT FOUND THEN
        -- A concurrent request with the same orderId, or holding the same
        -- campaign code, committed first.
        UPDATE voucher_redemption x SET status = old.status, updated_at = old.updated_at WHERE x.order_id = p_replaces;
        SELECT x.* INTO r FROM voucher_redemption x WHERE x.order_id = p_order;
        IF NOT FOUND AND v_unique IS NOT NULL THEN
            PERFORM voucherd_reject('ALREADY_USED', format('voucher=%s', p_code), 'CODE_USED');
        END IF;
        v_verdict := voucherd_order_verdict(r, p_code, p_customer);
        IF v_verdict <> '' THEN
            PERFORM voucherd_reject(v_verdict, voucherd_order_facts(r, p_code));
        END IF;
        redemption := r;
        replay := true;
        RETURN;
    END IF;

    -- The voucher row under its lock: a concurrent PATCH that made the
    -- order ineligible is seen here. The counts stay as they are.
    PERFORM 1 FROM voucher x
    WHERE x.code = v.code
      AND NOT x.disabled
      AND x.starts_at <= p_now AND p_now < x.ends_at
      AND x.min_order_amount <= p_amount
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        SELECT x.* INTO v FROM voucher x WHERE x.code = v.code;
        PERFORM voucherd_reject('NOT_ELIGIBLE', voucherd_eligibility_facts(v, p_amount, p_currency),
            voucherd_eligibility(v, p_amount, p_now, p_customer, p_currency));
    END IF;

    redemption := r;
    replay := false;
END
$$;
