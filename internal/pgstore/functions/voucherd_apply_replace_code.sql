-- voucherd_apply_replace_code writes one replacement taken by the gate
-- (Kafka mode) in one transaction: order p_order RESERVED in place of
-- p_replaces. p_unique is, for a flash campaign (p_code its id), the
-- campaign code p_order was taken with, recorded on its row ('' or NULL for
-- a voucher); a code of another campaign, or none for a campaign, is
-- refused (23514 voucher_redemption_code_campaign). When p_replaces is still
-- the customer's RESERVED hold on p_code it becomes RELEASED (first, so that
-- its campaign code, maybe p_unique, comes free) and the counts do not move
-- (the use passes from one order to the other, as it did in the gate). When
-- it is not (the expiry job or a release got there first and gave its use
-- back) the new order takes a use like voucherd_apply_reserved_codes, under
-- the same limits (23514 over the total limit, VD002 over the per-user
-- limit, 23505 on a campaign code a live order holds: the event is
-- refused). Either way p_order's hold continues p_replaces's (the same
-- customer's on p_code): its held_since is p_replaces's. A known p_order
-- changes nothing. p_window is the occurrence of the voucher's windows
-- p_order was taken in (NULL: none), recorded as window_start; its counter
-- row is created when missing, and p_replaces's use goes back to its own
-- occurrence. Lock order: p_replaces's row,
-- the new row, the customer's counter, the voucher row. It returns whether
-- this call inserted p_order and whose p_order is.
CREATE OR REPLACE FUNCTION voucherd_apply_replace_code(
    p_order text, p_code text, p_customer text, p_amount bigint, p_discount bigint,
    p_reserved_at timestamptz, p_expires_at timestamptz, p_replaces text, p_unique text,
    p_window timestamptz DEFAULT NULL,
    OUT o_inserted boolean, OUT o_voucher_code text, OUT o_customer text)
LANGUAGE plpgsql AS $$
DECLARE
    old voucher_redemption%ROWTYPE;
    v_limit integer;
    v_held integer;
    v_unique text := nullif(p_unique, '');
    v_moved boolean;
BEGIN
    IF v_unique IS NULL AND EXISTS (SELECT 1 FROM voucher v WHERE v.code = p_code AND v.campaign)
       OR v_unique IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM campaign_code c WHERE c.code = v_unique AND c.campaign_id = p_code) THEN
        RAISE EXCEPTION USING ERRCODE = '23514', CONSTRAINT = 'voucher_redemption_code_campaign',
            MESSAGE = format('code %L is not a code of campaign %s', coalesce(v_unique, ''), p_code);
    END IF;

    SELECT x.* INTO old FROM voucher_redemption x WHERE x.order_id = p_replaces FOR UPDATE;
    v_moved := old.order_id IS NOT NULL AND old.voucher_code = p_code AND old.customer = p_customer
               AND old.status = 'RESERVED';
    IF v_moved THEN
        UPDATE voucher_redemption x SET status = 'RELEASED', updated_at = p_reserved_at
        WHERE x.order_id = p_replaces;
    END IF;
    IF p_window IS NOT NULL THEN
        INSERT INTO voucher_limit (voucher_code, kind, period_start, cap)
        SELECT v.code, 'window', p_window, v.window_limit FROM voucher v
        WHERE v.code = p_code AND v.window_limit IS NOT NULL
        ON CONFLICT ON CONSTRAINT voucher_limit_pkey DO NOTHING;
    END IF;

    INSERT INTO voucher_redemption AS x
        (order_id, voucher_code, customer, customer_id, order_amount, discount_amount, status, created_at, updated_at,
         expires_at, code, held_since, window_start)
    VALUES (p_order, p_code, p_customer, voucherd_customer_legacy(p_customer), p_amount, p_discount, 'RESERVED', p_reserved_at, p_reserved_at, p_expires_at,
            v_unique, CASE WHEN old.voucher_code = p_code AND old.customer = p_customer
                           THEN least(coalesce(old.held_since, old.created_at), p_reserved_at) END, p_window)
    ON CONFLICT ON CONSTRAINT voucher_redemption_pkey DO NOTHING;
    IF NOT FOUND THEN
        IF v_moved THEN
            -- Known already: p_replaces is left as it was.
            UPDATE voucher_redemption x SET status = old.status, updated_at = old.updated_at
            WHERE x.order_id = p_replaces;
        END IF;
        SELECT false, x.voucher_code, x.customer INTO o_inserted, o_voucher_code, o_customer
        FROM voucher_redemption x WHERE x.order_id = p_order;
        RETURN;
    END IF;
    o_inserted := true;
    o_voucher_code := p_code;
    o_customer := p_customer;
    IF v_moved THEN
        RETURN;
    END IF;

    INSERT INTO voucher_customer_usage AS u (voucher_code, customer, customer_id, held)
    VALUES (p_code, p_customer, voucherd_customer_legacy(p_customer), 1)
    ON CONFLICT ON CONSTRAINT voucher_customer_usage_pkey DO UPDATE SET held = u.held + 1
    RETURNING u.held INTO v_held;
    UPDATE voucher v SET used_count = v.used_count + 1 WHERE v.code = p_code
    RETURNING v.per_user_limit INTO v_limit;
    IF v_held > v_limit THEN
        RAISE EXCEPTION USING ERRCODE = 'VD002',
            MESSAGE = format('customer %s would hold %s uses of voucher %s, above its perUserLimit %s',
                             p_customer, v_held, p_code, v_limit);
    END IF;
END
$$;
