-- voucherd_apply_reserved_codes writes reservations taken by the gate
-- (Kafka mode): it inserts the redemptions it does not know yet, raises each
-- customer's counter and then each voucher's used_count once by the number
-- inserted for it. p_unique holds, per event, the campaign code a use of a
-- flash campaign was taken with (p_codes is then the campaign id), NULL or ''
-- for a voucher's; it is recorded on the redemption. p_windows holds, per
-- event, the start of the occurrence of the voucher's windows the use was
-- taken in (NULL: none), recorded as window_start; the occurrences' counter
-- rows are created first (cap: the voucher's window_limit), so that the
-- trigger counts each use against its occurrence and a full one refuses
-- the call (23514 voucher_limit_held_le_cap). It returns, for each
-- known orderId of the batch, whether this call inserted it and whose it is.
-- Any refusal (unknown voucher: 23503; over the total limit: 23514; over a
-- per-user limit: VD002; a campaign code of another campaign: 23514
-- voucher_redemption_code_campaign; a campaign code a live redemption holds:
-- 23505 voucher_redemption_code_live_idx) fails the whole call, and the
-- caller retries the events one by one. Rows are locked sorted in byte
-- order (COLLATE "C"), the order every writer sorts in whatever the
-- database's collation.
--
-- What was inserted is taken from the INSERT's RETURNING, and the counters
-- and the limit check from the upsert's, so the common call (every event
-- new) looks nothing up by an array of keys. The one statement that does
-- (the answer when some orderId was known) runs through EXECUTE, so that
-- each call plans it for the table's current size: a plan cached while the
-- table was nearly empty (the first events of a database autovacuum has not
-- analyzed yet) scans the whole table, and PL/pgSQL would keep reusing it
-- on every later call.
CREATE OR REPLACE FUNCTION voucherd_apply_reserved_codes(
    p_order_ids text[], p_codes text[], p_customers text[], p_amounts bigint[],
    p_discounts bigint[], p_reserved_at timestamptz[], p_expires_at timestamptz[], p_unique text[],
    p_windows timestamptz[] DEFAULT NULL)
RETURNS TABLE (o_order_id text, o_inserted boolean, o_voucher_code text, o_customer text)
LANGUAGE plpgsql AS $$
DECLARE
    v_ins text[];             -- the orderIds inserted, with their vouchers and customers
    v_ins_codes text[];
    v_ins_customers text[];
    v_held_codes text[];      -- the counters raised, and their counts now
    v_held_customers text[];
    v_held integer[];
    v_limit integer;
    c record;
    b record;
BEGIN
    -- A use of a campaign names one of its codes, and a code names its own
    -- campaign (the service resolved it before the gate; the database
    -- checks it as it checks the voucher).
    -- Each distinct pair once: a batch is mostly one voucher's events.
    SELECT e.u, e.code INTO b
    FROM (SELECT DISTINCT coalesce(d.u, '') AS u, d.code FROM unnest(p_codes, p_unique) AS d(code, u)) AS e
    LEFT JOIN campaign_code k ON k.code = e.u
    LEFT JOIN voucher w ON w.code = e.code
    WHERE CASE WHEN e.u = '' THEN coalesce(w.campaign, false)
               ELSE k.campaign_id IS DISTINCT FROM e.code END
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '23514', CONSTRAINT = 'voucher_redemption_code_campaign',
            MESSAGE = format('code %L is not a code of campaign %s', b.u, b.code);
    END IF;

    -- The counters of the occurrences the uses were taken in, sorted.
    IF p_windows IS NOT NULL THEN
        INSERT INTO voucher_limit (voucher_code, kind, period_start, cap)
        SELECT DISTINCT e.code, 'window', e.w, v.window_limit
        FROM unnest(p_codes COLLATE "C", p_windows) AS e(code, w) JOIN voucher v ON v.code = e.code
        WHERE e.w IS NOT NULL AND v.window_limit IS NOT NULL
        ORDER BY 1, 3
        ON CONFLICT ON CONSTRAINT voucher_limit_pkey DO NOTHING;
    END IF;

    -- Sorted by orderId (lock order); for a duplicate orderId in the batch the
    -- first occurrence wins. The reserved event's setting is read once for
    -- the rows inserted (voucherd.reserved_wanted, migration 024), for this
    -- statement only.
    PERFORM set_config('voucherd.reserved_wanted',
                       coalesce((SELECT s.reserved_wanted FROM voucherd_event_settings s), false)::text, true);
    WITH ins AS (
        INSERT INTO voucher_redemption AS x
            (order_id, voucher_code, customer, customer_id, order_amount, discount_amount, status, created_at, updated_at,
             expires_at, code, window_start)
        SELECT e.order_id, e.code, e.customer, voucherd_customer_legacy(e.customer), e.amount, e.discount, 'RESERVED', e.reserved_at, e.reserved_at, e.expires_at,
               nullif(e.u, ''), e.w
        FROM unnest(p_order_ids COLLATE "C", p_codes COLLATE "C", p_customers COLLATE "C", p_amounts,
                    p_discounts, p_reserved_at, p_expires_at,
                    coalesce(p_unique, array_fill(NULL::text, ARRAY[cardinality(p_order_ids)])),
                    coalesce(p_windows, array_fill(NULL::timestamptz, ARRAY[cardinality(p_order_ids)])))
             WITH ORDINALITY AS e(order_id, code, customer, amount, discount, reserved_at, expires_at, u, w, n)
        ORDER BY e.order_id, e.n
        ON CONFLICT ON CONSTRAINT voucher_redemption_pkey DO NOTHING
        RETURNING x.order_id, x.voucher_code, x.customer
    )
    SELECT coalesce(array_agg(ins.order_id), '{}'), coalesce(array_agg(ins.voucher_code), '{}'),
           coalesce(array_agg(ins.customer), '{}')
    INTO v_ins, v_ins_codes, v_ins_customers FROM ins;
    PERFORM set_config('voucherd.reserved_wanted', '', true);

    IF cardinality(v_ins) > 0 THEN
        -- The customers' counters, raised by what was inserted for them, in
        -- one statement sorted by (voucher, customer): the lock order. The
        -- rows stay locked, so the counts RETURNING gives are still theirs
        -- when the limit is checked below.
        WITH up AS (
            INSERT INTO voucher_customer_usage AS u (voucher_code, customer, customer_id, held)
            SELECT e.code, e.customer, voucherd_customer_legacy(e.customer), count(*)::integer
            FROM unnest(v_ins_codes COLLATE "C", v_ins_customers COLLATE "C") AS e(code, customer)
            GROUP BY e.code, e.customer
            ORDER BY e.code, e.customer
            ON CONFLICT ON CONSTRAINT voucher_customer_usage_pkey
                DO UPDATE SET held = u.held + excluded.held
            RETURNING u.voucher_code, u.customer, u.held
        )
        SELECT array_agg(up.voucher_code), array_agg(up.customer), array_agg(up.held)
        INTO v_held_codes, v_held_customers, v_held FROM up;

        FOR c IN SELECT e.code AS voucher_code, count(*)::integer AS n
                 FROM unnest(v_ins_codes COLLATE "C") AS e(code)
                 GROUP BY e.code
                 ORDER BY e.code
        LOOP
            UPDATE voucher v SET used_count = v.used_count + c.n
            WHERE v.code = c.voucher_code
            RETURNING v.per_user_limit INTO v_limit;

            -- Checked under the voucher row lock, so a concurrent PATCH of
            -- per_user_limit is seen; the counters are this call's, locked.
            SELECT h.customer, h.held INTO b
            FROM unnest(v_held_codes, v_held_customers, v_held) AS h(code, customer, held)
            WHERE h.code = c.voucher_code AND h.held > v_limit
            LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'VD002',
                    MESSAGE = format('customer %s would hold %s uses of voucher %s, above its perUserLimit %s',
                                     b.customer, b.held, c.voucher_code, v_limit);
            END IF;
        END LOOP;
    END IF;

    -- Every orderId inserted: the answer is what was inserted. Otherwise
    -- the known ones are read. The inserted orderIds are distinct and
    -- among the batch's, so as many as the batch holds means every one
    -- (a batch that names an orderId twice is read back); array
    -- containment would compare every pair.
    IF cardinality(v_ins) = cardinality(p_order_ids) THEN
        RETURN QUERY SELECT i.order_id, true, i.code, i.customer
                     FROM unnest(v_ins, v_ins_codes, v_ins_customers) AS i(order_id, code, customer);
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'SELECT x.order_id, x.order_id = ANY ($1), x.voucher_code, x.customer
         FROM voucher_redemption x WHERE x.order_id = ANY ($2)' USING v_ins, p_order_ids;
END
$$;
