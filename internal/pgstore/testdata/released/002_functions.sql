-- 002_functions: the state changes of redemptions, each one statement.
--
-- Every change that takes or gives back a use runs inside one function call,
-- so it costs one round trip and runs as one implicit transaction: a rejection
-- raises an exception and everything the call wrote rolls back.
--
-- Rejections raise SQLSTATE VD001 with MESSAGE = the voucher.ErrorCode,
-- DETAIL = a human message and HINT = the NOT_ELIGIBLE reason (or '').
-- VD002 is a batch event the per-customer limit refuses (ApplyReserved).
-- VD900 means the counters are inconsistent (a bug, reported as INTERNAL).
--
-- Lock order, the same everywhere so that reserve, confirm, release, the
-- expiry sweep and the Kafka consumer never deadlock:
--   1. redemption rows (sorted by order_id when several),
--   2. voucher_customer_usage rows (sorted by voucher_code, customer_id),
--   3. voucher rows (sorted by code), with NO KEY UPDATE only: the foreign
--      key of a new redemption takes KEY SHARE on its voucher, which does not
--      conflict with NO KEY UPDATE, so that early lock cannot deadlock.

-- voucherd_ts formats a timestamp like Go's time.RFC3339 in UTC.
CREATE OR REPLACE FUNCTION voucherd_ts(p_ts timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT to_char(p_ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;

-- voucherd_reject raises a rejection the Go adapter turns into *voucher.Error.
CREATE OR REPLACE FUNCTION voucherd_reject(p_code text, p_message text, p_reason text DEFAULT '')
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'VD001', MESSAGE = p_code, DETAIL = p_message, HINT = p_reason;
END
$$;

-- voucherd_check_order rejects a known orderId that cannot be replayed for
-- this voucher and customer; it returns when the redemption is a replay.
CREATE OR REPLACE FUNCTION voucherd_check_order(r voucher_redemption, p_code text, p_customer bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF r.voucher_code <> p_code THEN
        PERFORM voucherd_reject('ORDER_CONFLICT',
            format('order %s already uses voucher %s', r.order_id, r.voucher_code));
    END IF;
    IF r.customer_id <> p_customer THEN
        PERFORM voucherd_reject('ORDER_CONFLICT',
            format('order %s belongs to another customer', r.order_id));
    END IF;
    IF r.status = 'RELEASED' THEN
        PERFORM voucherd_reject('ORDER_RELEASED',
            format('order %s was released; start a new attempt with a new orderId', r.order_id));
    END IF;
END
$$;

-- voucherd_check_eligible applies the rules of voucher.CheckEligible with the
-- caller's clock, with the same messages.
CREATE OR REPLACE FUNCTION voucherd_check_eligible(v voucher, p_amount bigint, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_now < v.starts_at THEN
        PERFORM voucherd_reject('NOT_ELIGIBLE',
            format('voucher %s starts at %s', v.code, voucherd_ts(v.starts_at)), 'NOT_STARTED');
    END IF;
    IF p_now >= v.ends_at THEN
        PERFORM voucherd_reject('NOT_ELIGIBLE',
            format('voucher %s ended at %s', v.code, voucherd_ts(v.ends_at)), 'EXPIRED');
    END IF;
    IF p_amount < v.min_order_amount THEN
        PERFORM voucherd_reject('NOT_ELIGIBLE',
            format('order amount %s is below the minimum %s', p_amount, v.min_order_amount), 'ORDER_AMOUNT_TOO_LOW');
    END IF;
END
$$;

-- voucherd_give_back returns one held use of a customer to the voucher, in
-- lock order (customer row, then voucher row).
CREATE OR REPLACE FUNCTION voucherd_give_back(p_code text, p_customer bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE voucher_customer_usage u SET held = u.held - 1
    WHERE u.voucher_code = p_code AND u.customer_id = p_customer;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'VD900',
            MESSAGE = format('no usage counter for customer %s of voucher %s', p_customer, p_code);
    END IF;
    UPDATE voucher v SET used_count = v.used_count - 1 WHERE v.code = p_code;
END
$$;

-- voucherd_reserve takes one use of p_code for order p_order, or replays the
-- known redemption of p_order. Order of work: cheap reads and rejections
-- first, then the writes in lock order, the hot voucher row last so that its
-- row lock is held for as little time as possible.
CREATE OR REPLACE FUNCTION voucherd_reserve(
    p_code text, p_customer bigint, p_order text, p_amount bigint, p_now timestamptz, p_ttl interval,
    OUT redemption voucher_redemption, OUT replay boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v voucher%ROWTYPE;
    r voucher_redemption%ROWTYPE;
    v_held integer;
BEGIN
    -- a. The voucher, without a lock.
    SELECT x.* INTO v FROM voucher x WHERE x.code = p_code;
    IF NOT FOUND THEN
        PERFORM voucherd_reject('VOUCHER_NOT_FOUND', format('voucher %s not found', p_code));
    END IF;

    -- b. A known orderId is a replay or a conflict; it takes nothing.
    SELECT x.* INTO r FROM voucher_redemption x WHERE x.order_id = p_order;
    IF FOUND THEN
        PERFORM voucherd_check_order(r, p_code, p_customer);
        redemption := r;
        replay := true;
        RETURN;
    END IF;

    -- c. Eligibility with the caller's clock.
    PERFORM voucherd_check_eligible(v, p_amount, p_now);

    -- d. Sold out as far as the read shows: reject before writing anything.
    IF v.used_count >= v.total_limit THEN
        PERFORM voucherd_reject('OUT_OF_STOCK', format('voucher %s has no uses left', p_code));
    END IF;

    -- e. The redemption row. Nothing inserted means a concurrent request with
    -- the same orderId committed first (the insert waited for it).
    INSERT INTO voucher_redemption AS x
        (order_id, voucher_code, customer_id, order_amount, discount_amount, status, created_at, updated_at, expires_at)
    VALUES (p_order, p_code, p_customer, p_amount, v.discount_amount, 'RESERVED', p_now, p_now, p_now + p_ttl)
    ON CONFLICT ON CONSTRAINT voucher_redemption_pkey DO NOTHING
    RETURNING x.* INTO r;
    IF NOT FOUND THEN
        SELECT x.* INTO r FROM voucher_redemption x WHERE x.order_id = p_order;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'VD900', MESSAGE = format('order %s conflicted but is absent', p_order);
        END IF;
        PERFORM voucherd_check_order(r, p_code, p_customer);
        redemption := r;
        replay := true;
        RETURN;
    END IF;

    -- f. The customer's counter, conditional on the per-user limit.
    INSERT INTO voucher_customer_usage AS u (voucher_code, customer_id, held)
    VALUES (p_code, p_customer, 1)
    ON CONFLICT ON CONSTRAINT voucher_customer_usage_pkey
        DO UPDATE SET held = u.held + 1 WHERE u.held < v.per_user_limit
    RETURNING u.held INTO v_held;
    IF NOT FOUND THEN
        PERFORM voucherd_reject('ALREADY_USED',
            format('customer %s already holds %s use(s) of voucher %s', p_customer, v.per_user_limit, p_code));
    END IF;

    -- g. The hot row, last. Its conditions are re-evaluated on the latest
    -- version of the row, so a concurrent PATCH or the last use taken by
    -- another request is seen here.
    UPDATE voucher x SET used_count = x.used_count + 1
    WHERE x.code = p_code
      AND x.used_count < x.total_limit
      AND x.starts_at <= p_now AND p_now < x.ends_at
      AND x.min_order_amount <= p_amount
      AND x.per_user_limit >= v_held;
    IF NOT FOUND THEN
        SELECT x.* INTO v FROM voucher x WHERE x.code = p_code;
        PERFORM voucherd_check_eligible(v, p_amount, p_now);
        IF v.per_user_limit < v_held THEN
            PERFORM voucherd_reject('ALREADY_USED',
                format('customer %s already holds %s use(s) of voucher %s', p_customer, v.per_user_limit, p_code));
        END IF;
        PERFORM voucherd_reject('OUT_OF_STOCK', format('voucher %s has no uses left', p_code));
    END IF;

    redemption := r;
    replay := false;
END
$$;

-- voucherd_confirm moves a RESERVED redemption to CONFIRMED. A CONFIRMED or
-- RELEASED one is returned as it is. A RESERVED one past its expiry is
-- released right here, as the sweep would, and returned RELEASED with
-- expired = true. The row lock and the status re-read make a confirm racing
-- the sweep end in exactly one terminal state.
CREATE OR REPLACE FUNCTION voucherd_confirm(
    p_code text, p_order text, p_now timestamptz,
    OUT redemption voucher_redemption, OUT expired boolean)
LANGUAGE plpgsql AS $$
DECLARE
    r voucher_redemption%ROWTYPE;
BEGIN
    expired := false;
    SELECT x.* INTO r FROM voucher_redemption x
    WHERE x.order_id = p_order AND x.voucher_code = p_code
    FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM voucherd_reject('RESERVATION_NOT_FOUND',
            format('reservation %s of voucher %s not found', p_order, p_code));
    END IF;

    IF r.status = 'RESERVED' THEN
        IF r.expires_at <= p_now THEN
            PERFORM voucherd_give_back(r.voucher_code, r.customer_id);
            UPDATE voucher_redemption x SET status = 'RELEASED', updated_at = p_now
            WHERE x.order_id = p_order RETURNING x.* INTO r;
            expired := true;
        ELSE
            UPDATE voucher_redemption x SET status = 'CONFIRMED', updated_at = p_now
            WHERE x.order_id = p_order RETURNING x.* INTO r;
        END IF;
    END IF;
    redemption := r;
END
$$;

-- voucherd_release moves a held redemption to RELEASED and gives its use back
-- to the customer and the voucher. A RELEASED one is returned with
-- released = false.
CREATE OR REPLACE FUNCTION voucherd_release(
    p_code text, p_order text, p_now timestamptz,
    OUT redemption voucher_redemption, OUT released boolean)
LANGUAGE plpgsql AS $$
DECLARE
    r voucher_redemption%ROWTYPE;
BEGIN
    SELECT x.* INTO r FROM voucher_redemption x
    WHERE x.order_id = p_order AND x.voucher_code = p_code
    FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM voucherd_reject('RESERVATION_NOT_FOUND',
            format('reservation %s of voucher %s not found', p_order, p_code));
    END IF;

    IF r.status = 'RELEASED' THEN
        redemption := r;
        released := false;
        RETURN;
    END IF;

    PERFORM voucherd_give_back(r.voucher_code, r.customer_id);
    UPDATE voucher_redemption x SET status = 'RELEASED', updated_at = p_now
    WHERE x.order_id = p_order RETURNING x.* INTO r;
    redemption := r;
    released := true;
END
$$;

-- voucherd_expire releases up to p_limit RESERVED redemptions due at p_now,
-- oldest first, and returns them. SKIP LOCKED lets concurrent sweepers split
-- the work; the status re-check under the row lock makes each row released
-- once. Counters are given back per customer and per voucher, in lock order.
CREATE OR REPLACE FUNCTION voucherd_expire(p_now timestamptz, p_limit integer)
RETURNS SETOF voucher_redemption LANGUAGE plpgsql AS $$
DECLARE
    v_ids text[];
    c record;
BEGIN
    WITH due AS (
        SELECT d.order_id FROM voucher_redemption d
        WHERE d.status = 'RESERVED' AND d.expires_at <= p_now
        ORDER BY d.expires_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ), done AS (
        UPDATE voucher_redemption x SET status = 'RELEASED', updated_at = p_now
        FROM due WHERE x.order_id = due.order_id
        RETURNING x.order_id
    )
    SELECT coalesce(array_agg(done.order_id), '{}') INTO v_ids FROM done;

    IF cardinality(v_ids) = 0 THEN
        RETURN;
    END IF;

    FOR c IN
        SELECT x.voucher_code, x.customer_id, count(*)::integer AS n
        FROM voucher_redemption x WHERE x.order_id = ANY (v_ids)
        GROUP BY x.voucher_code, x.customer_id
        ORDER BY x.voucher_code, x.customer_id
    LOOP
        UPDATE voucher_customer_usage u SET held = u.held - c.n
        WHERE u.voucher_code = c.voucher_code AND u.customer_id = c.customer_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'VD900',
                MESSAGE = format('no usage counter for customer %s of voucher %s', c.customer_id, c.voucher_code);
        END IF;
    END LOOP;

    FOR c IN
        SELECT x.voucher_code, count(*)::integer AS n
        FROM voucher_redemption x WHERE x.order_id = ANY (v_ids)
        GROUP BY x.voucher_code
        ORDER BY x.voucher_code
    LOOP
        UPDATE voucher v SET used_count = v.used_count - c.n WHERE v.code = c.voucher_code;
    END LOOP;

    RETURN QUERY
        SELECT x.* FROM voucher_redemption x WHERE x.order_id = ANY (v_ids)
        ORDER BY x.expires_at, x.order_id;
END
$$;

-- voucherd_apply_reserved writes reservations taken by the gate (Kafka mode):
-- it inserts the redemptions it does not know yet, raises each customer's
-- counter and then each voucher's used_count once by the number inserted for
-- it. It returns, for each known orderId of the batch, whether this call
-- inserted it and whose it is. Any refusal (unknown voucher: 23503; over the
-- total limit: 23514; over a per-user limit: VD002) fails the whole call, and
-- the caller retries the events one by one.
CREATE OR REPLACE FUNCTION voucherd_apply_reserved(
    p_order_ids text[], p_codes text[], p_customers bigint[], p_amounts bigint[],
    p_discounts bigint[], p_reserved_at timestamptz[], p_expires_at timestamptz[])
RETURNS TABLE (o_order_id text, o_inserted boolean, o_voucher_code text, o_customer_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_ins text[];
    v_limit integer;
    c record;
    b record;
BEGIN
    -- Sorted by orderId (lock order); for a duplicate orderId in the batch the
    -- first occurrence wins.
    WITH ins AS (
        INSERT INTO voucher_redemption AS x
            (order_id, voucher_code, customer_id, order_amount, discount_amount, status, created_at, updated_at, expires_at)
        SELECT e.order_id, e.code, e.customer_id, e.amount, e.discount, 'RESERVED', e.reserved_at, e.reserved_at, e.expires_at
        FROM unnest(p_order_ids, p_codes, p_customers, p_amounts, p_discounts, p_reserved_at, p_expires_at)
             WITH ORDINALITY AS e(order_id, code, customer_id, amount, discount, reserved_at, expires_at, n)
        ORDER BY e.order_id, e.n
        ON CONFLICT ON CONSTRAINT voucher_redemption_pkey DO NOTHING
        RETURNING x.order_id
    )
    SELECT coalesce(array_agg(ins.order_id), '{}') INTO v_ins FROM ins;

    IF cardinality(v_ins) > 0 THEN
        FOR c IN
            SELECT x.voucher_code, x.customer_id, count(*)::integer AS n
            FROM voucher_redemption x WHERE x.order_id = ANY (v_ins)
            GROUP BY x.voucher_code, x.customer_id
            ORDER BY x.voucher_code, x.customer_id
        LOOP
            INSERT INTO voucher_customer_usage AS u (voucher_code, customer_id, held)
            VALUES (c.voucher_code, c.customer_id, c.n)
            ON CONFLICT ON CONSTRAINT voucher_customer_usage_pkey
                DO UPDATE SET held = u.held + excluded.held;
        END LOOP;

        FOR c IN
            SELECT x.voucher_code, count(*)::integer AS n
            FROM voucher_redemption x WHERE x.order_id = ANY (v_ins)
            GROUP BY x.voucher_code
            ORDER BY x.voucher_code
        LOOP
            UPDATE voucher v SET used_count = v.used_count + c.n
            WHERE v.code = c.voucher_code
            RETURNING v.per_user_limit INTO v_limit;

            -- Checked under the voucher row lock, so a concurrent PATCH of
            -- per_user_limit is seen.
            SELECT u.customer_id, u.held INTO b FROM voucher_customer_usage u
            WHERE u.voucher_code = c.voucher_code AND u.held > v_limit
              AND u.customer_id IN (
                  SELECT x.customer_id FROM voucher_redemption x
                  WHERE x.order_id = ANY (v_ins) AND x.voucher_code = c.voucher_code)
            LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'VD002',
                    MESSAGE = format('customer %s would hold %s uses of voucher %s, above its perUserLimit %s',
                                     b.customer_id, b.held, c.voucher_code, v_limit);
            END IF;
        END LOOP;
    END IF;

    RETURN QUERY
        SELECT x.order_id, x.order_id = ANY (v_ins), x.voucher_code, x.customer_id
        FROM voucher_redemption x WHERE x.order_id = ANY (p_order_ids);
END
$$;
