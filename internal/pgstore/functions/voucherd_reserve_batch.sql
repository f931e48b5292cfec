-- voucherd_reserve_batch: many reservations of one voucher in one
-- transaction, what the write combiner (combiner.go) sends: the reservations
-- of one hot voucher that queued up while the previous write was in flight.
-- It decides each element in order exactly as voucherd_reserve_one would if the
-- elements ran one after the other, and answers each with a row instead of
-- raising, so one rejection does not roll back the others. The hot voucher
-- row is updated once, last, by the number of uses granted, so the batch
-- pays one row lock and one WAL flush instead of one per use.
--
-- Lock order is voucherd_reserve_one's (redemption rows, then customer counters,
-- then the voucher row), and within each kind the rows are taken sorted (by
-- order_id, by customer) in byte order (COLLATE "C", as every writer sorts
-- whatever the database's collation), never in arrival order, so a batch
-- cannot deadlock with another batch, the expiry sweep or the Kafka
-- consumer; c_ids and the counters read for it are in that order too. That
-- is why the function works in phases:
--   1. reads without locks: the voucher, each element's eligibility;
--   2. a placeholder redemption row for every new orderId that an eligible
--      element carries, inserted sorted by order_id (the rows are ours until
--      commit, so later phases never wait for them);
--   3. the counters of the customers who may take a use, locked sorted by
--      customer (created with held = 0 when missing), then the stock read
--      again (3b), so that every use those customers gave back is in it;
--   4. the decisions, in arrival order, in memory: the committed redemptions,
--      the placeholders, the locked counters and the stock of step 3b;
--   5. the rows made to match the decisions (placeholders nobody took are
--      deleted, counters set to what was taken);
--   6. the voucher row, last: used_count raised by the number taken, when it
--      still has that many uses and the same rules. When it has fewer (other
--      writers took uses since step 3b), the decisions are made again with
--      the stock the locked row shows and step 5 is repeated; every row
--      involved is already locked by this call, so nothing can change in
--      between. (When it has more, the decisions stand: like
--      voucherd_reserve_one's step d, a stale read may undersell, never
--      oversell.) When the voucher's rules changed under the batch (a
--      concurrent PATCH of the window, the minimum amount or the per-user
--      limit) the call raises VD003 and rolls back whole; the caller then
--      reserves each element on its own with voucherd_reserve_one. A campaign
--      code, or a voucher with a limit row other than its money budget,
--      raises VD003 at once.
--
-- A money budget (voucher_limit, kind budget) is decided here too, with one
-- conditional update of its counter: its row is locked right after the
-- placeholders (2b, the lock order's place for limit rows), the decisions
-- fit each element's discount to what is left (voucherd_limit_fit's rule:
-- after the stock, before the customer's quota; clipped when the budget
-- clips), the placeholders are given the discounts decided (step 5), and
-- step 6 raises the counter by the discounts granted, under the CHECK. The
-- trigger voucherd_limit_count leaves the batch's own writes to it
-- (voucherd.limits_by_caller, set for the call only): placeholders are
-- inserted for every eligible element before the decisions, and would
-- otherwise count money no element may get.
--
-- The statements that look rows up by an array of keys run through EXECUTE,
-- so that each call plans them for its own arrays and the tables' current
-- size, not with a plan cached while the tables were nearly empty.
--
-- Result: one row per element, o_n = its 1-based position. o_error is ''
-- for a reservation taken or replayed (o_replay), else the voucher.ErrorCode
-- with o_reason (the NOT_ELIGIBLE reason or '') and o_message, the facts
-- voucherd_reserve_one would raise (voucherd_reject), and o_retry_ms for
-- HELD_OUT (else 0). The redemption columns describe the redemption for a
-- success and echo the request (status '') for a rejection. Each grant
-- reports o_used and o_total as voucherd_reserve_one does, in arrival order (0
-- for every other answer). p_currencies are the elements' currencies
-- (NULL, or a NULL element: none).
CREATE OR REPLACE FUNCTION voucherd_reserve_batch(
    p_code text, p_customers text[], p_orders text[], p_amounts bigint[], p_nows timestamptz[], p_ttl interval,
    p_currencies text[] DEFAULT NULL)
RETURNS TABLE (
    o_order_id text, o_voucher_code text, o_customer text, o_order_amount bigint, o_discount_amount bigint,
    o_status text, o_created_at timestamptz, o_updated_at timestamptz, o_expires_at timestamptz,
    o_replay boolean, o_error text, o_reason text, o_message text, o_n integer,
    o_retry_ms bigint, o_used integer, o_total integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_n integer := coalesce(cardinality(p_orders), 0);
    v voucher%ROWTYPE;
    v_locked voucher%ROWTYPE;
    v_room integer;   -- uses the decisions may grant
    v_taken integer;  -- uses the decisions granted
    v_used integer;   -- used_count after the batch's update
    v_total integer;  -- total_limit under that update's row lock
    v_granted integer := 0;
    v_hold timestamptz;  -- the earliest RESERVED hold's expiry, for stock rejections
    v_i integer;
    v_j integer;
    v_k integer;
    v_m integer;
    r voucher_redemption%ROWTYPE;

    -- Per element, by position.
    e_ok boolean[];          -- eligible under v with its own clock
    e_reason text[];         -- NOT_ELIGIBLE reason when not
    e_error text[];          -- the answer: '' or a voucher.ErrorCode
    e_ans_reason text[];
    e_message text[];
    e_replay boolean[];
    e_row voucher_redemption[];  -- the redemption answered, for successes
    e_k integer[];           -- its orderId's placeholder in k_orders (NULL: none)
    e_c integer[];           -- its customer's counter in c_ids (NULL: none)

    -- Committed redemptions of the batch's orderIds (not ours).
    r_orders text[];
    r_rows voucher_redemption[];

    -- Placeholder redemptions this call inserted, by order_id: k_db is the
    -- element whose values the stored row holds (0 once deleted), k_owner the
    -- element the current decisions gave the use to (0 for none).
    k_orders text[] := '{}';
    k_db integer[] := '{}';
    k_owner integer[];
    v_delete text[];

    -- Locked customer counters, sorted: held when locked, held as stored now,
    -- held as decided; and those this call created.
    c_ids text[] := '{}';
    c_start integer[] := '{}';
    c_db integer[];
    c_held integer[];
    c_created text[] := '{}';
    c_new boolean[] := '{}';  -- by position in c_ids: created by this call and still there
    v_delete_customers text[];

    -- The money budget: whether the voucher has one, its row as locked, what
    -- the decisions left of it, what they granted, each element's discount.
    b_has boolean := false;
    v_first record;  -- step 1's read: the voucher x, campaign, l_other, l_any
    b voucher_limit%ROWTYPE;
    b_left bigint;
    b_taken bigint;
    e_discount bigint[];
    v_want bigint;
BEGIN
    IF v_n = 0 THEN
        RETURN;
    END IF;
    IF cardinality(p_customers) IS DISTINCT FROM v_n OR cardinality(p_amounts) IS DISTINCT FROM v_n
       OR cardinality(p_nows) IS DISTINCT FROM v_n THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'voucherd_reserve_batch: arrays of different lengths';
    END IF;

    -- 1. The voucher, without a lock, and each element's eligibility with the
    -- verdict of voucherd_eligibility. One statement also reads what decides
    -- whether this function may take the call (a campaign code, a limit it
    -- does not decide), whether the voucher has a money budget, and the
    -- reserved event's setting, which the placeholders' insert then takes
    -- from voucherd.reserved_wanted instead of reading it per row
    -- (migration 024; set back to '' before every return).
    SELECT (SELECT x FROM voucher x WHERE x.code = p_code) AS x,
           EXISTS (SELECT 1 FROM campaign_code c WHERE c.code = p_code) AS campaign,
           EXISTS (SELECT 1 FROM voucher_limit l WHERE l.voucher_code = p_code AND l.kind <> 'budget') AS l_other,
           EXISTS (SELECT 1 FROM voucher_limit l WHERE l.voucher_code = p_code) AS l_any,
           set_config('voucherd.reserved_wanted',
                      coalesce((SELECT s.reserved_wanted FROM voucherd_event_settings s), false)::text, true)
    INTO v_first;
    -- A campaign code (or budget) is decided by voucherd_reserve alone: the
    -- orders of one campaign code compete for the code itself.
    -- So is a voucher with a limit this function does not decide.
    v := v_first.x;
    b_has := v_first.l_any;
    IF v.code IS NOT NULL AND (v.campaign OR v_first.l_other OR v.schedule IS NOT NULL)
       OR v.code IS NULL AND v_first.campaign THEN
        RAISE EXCEPTION USING ERRCODE = 'VD003', MESSAGE = format('campaign code %s: reserve one by one', p_code);
    END IF;
    IF v.code IS NULL THEN
        PERFORM set_config('voucherd.reserved_wanted', '', true);
        RETURN QUERY
            SELECT e.u_order, p_code, e.u_customer, e.u_amount, 0::bigint, ''::text, e.u_now, e.u_now, e.u_now,
                   false, 'VOUCHER_NOT_FOUND'::text, ''::text, format('voucher=%s', p_code), e.u_n::integer,
                   0::bigint, 0, 0
            FROM unnest(p_orders, p_customers, p_amounts, p_nows) WITH ORDINALITY
                 AS e(u_order, u_customer, u_amount, u_now, u_n);
        RETURN;
    END IF;
    IF b_has THEN
        PERFORM set_config('voucherd.limits_by_caller', 'on', true);
    END IF;
    e_ok := array_fill(true, ARRAY[v_n]);
    e_reason := array_fill(''::text, ARRAY[v_n]);
    FOR v_i IN 1..v_n LOOP
        e_reason[v_i] := voucherd_eligibility(v, p_amounts[v_i], p_nows[v_i], p_customers[v_i], p_currencies[v_i]);
        e_ok[v_i] := e_reason[v_i] = '';
    END LOOP;

    -- Sold out as far as the read shows: no element can take a use, so
    -- nothing is written or locked (voucherd_reserve_one step d).
    v_room := v.total_limit - v.used_count;
    IF v_room > 0 THEN
        -- 2. Placeholders, sorted by order_id, with the values of the first
        -- eligible element carrying each orderId. A conflict waits for the
        -- transaction that holds the orderId; once it committed, the row is
        -- read below as a committed redemption.
        WITH cand AS (
            SELECT DISTINCT ON (e.u_order) e.u_order, e.u_customer, e.u_amount, e.u_now, e.u_n::integer AS u_n
            FROM unnest(p_orders COLLATE "C", p_customers COLLATE "C", p_amounts, p_nows) WITH ORDINALITY
                 AS e(u_order, u_customer, u_amount, u_now, u_n)
            WHERE e_ok[e.u_n::integer]
            ORDER BY e.u_order, e.u_n
        ), ins AS (
            INSERT INTO voucher_redemption AS x
                (order_id, voucher_code, customer, customer_id, order_amount, discount_amount, status, created_at, updated_at,
                 expires_at)
            SELECT cand.u_order, p_code, cand.u_customer, voucherd_customer_legacy(cand.u_customer), cand.u_amount,
                   voucherd_discount(v.discount_amount, v.discount_percent_bp, v.max_discount_amount, cand.u_amount), 'RESERVED',
                   cand.u_now, cand.u_now, cand.u_now + p_ttl
            FROM cand
            ORDER BY cand.u_order
            ON CONFLICT ON CONSTRAINT voucher_redemption_pkey DO NOTHING
            RETURNING x.order_id
        )
        SELECT coalesce(array_agg(cand.u_order ORDER BY cand.u_order), '{}'),
               coalesce(array_agg(cand.u_n ORDER BY cand.u_order), '{}')
        INTO k_orders, k_db
        FROM cand JOIN ins ON ins.order_id = cand.u_order;

        -- 2b. The money budget's row, locked (after the redemption rows,
        -- before the customer counters).
        IF b_has THEN
            SELECT l.* INTO b FROM voucher_limit l
            WHERE l.voucher_code = p_code AND l.kind = 'budget' AND l.period_start = '-infinity'
            FOR NO KEY UPDATE;
        END IF;

        -- 3. The counters of every customer who may take a use: those of the
        -- eligible elements whose orderId has a placeholder. ON CONFLICT DO
        -- UPDATE locks the existing row even though its WHERE is false, so
        -- existing rows are locked without a new row version; RETURNING
        -- lists the rows this call created. A created counter starts at 1,
        -- what its customer usually takes, so that step 5 rewrites it only
        -- when the decisions differ (c_db says what is stored); the
        -- decisions count it from 0 (c_start). When every counter is
        -- created, nothing is left to read.
        WITH ids AS (
            SELECT DISTINCT e.u_customer
            FROM unnest(p_orders COLLATE "C", p_customers COLLATE "C") WITH ORDINALITY AS e(u_order, u_customer, u_n)
            JOIN unnest(k_orders) AS k(u_order) ON k.u_order = e.u_order
            WHERE e_ok[e.u_n::integer]
        ), ins AS (
            INSERT INTO voucher_customer_usage AS u (voucher_code, customer, customer_id, held)
            SELECT p_code, w.u_customer, voucherd_customer_legacy(w.u_customer), 1 FROM ids AS w
            ORDER BY w.u_customer
            ON CONFLICT ON CONSTRAINT voucher_customer_usage_pkey DO UPDATE SET held = u.held WHERE false
            RETURNING u.customer
        )
        SELECT (SELECT coalesce(array_agg(ids.u_customer ORDER BY ids.u_customer), '{}') FROM ids),
               (SELECT coalesce(array_agg(ins.customer), '{}') FROM ins)
        INTO c_ids, c_created;
        IF cardinality(c_ids) > 0 THEN
            IF cardinality(c_created) = cardinality(c_ids) THEN
                c_start := array_fill(0, ARRAY[cardinality(c_ids)]);
                c_new := array_fill(true, ARRAY[cardinality(c_ids)]);
            ELSE
                EXECUTE 'SELECT coalesce(array_agg(u.held ORDER BY u.customer COLLATE "C"), ''{}'')
                         FROM voucher_customer_usage u WHERE u.voucher_code = $1 AND u.customer = ANY ($2)'
                INTO c_start USING p_code, c_ids;
                IF cardinality(c_start) <> cardinality(c_ids) THEN
                    RAISE EXCEPTION USING ERRCODE = 'VD900',
                        MESSAGE = format('a usage counter of voucher %s vanished under its lock', p_code);
                END IF;
                c_new := array_fill(false, ARRAY[cardinality(c_ids)]);
                FOR v_m IN 1..cardinality(c_ids) LOOP
                    c_new[v_m] := c_ids[v_m] = ANY (c_created);
                    IF c_new[v_m] THEN
                        c_start[v_m] := 0;
                    END IF;
                END LOOP;
            END IF;
        END IF;

        -- 3b. The stock as it is now that the counters are locked (a fresh
        -- snapshot): a use one of these customers gave back after step 1
        -- shows in their counter, so it must show in the room too.
        SELECT x.total_limit - x.used_count INTO v_room FROM voucher x WHERE x.code = p_code;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'VD900', MESSAGE = format('voucher %s vanished', p_code);
        END IF;
    END IF;
    c_db := c_start;
    FOR v_m IN 1..coalesce(cardinality(c_ids), 0) LOOP
        IF c_new[v_m] THEN
            c_db[v_m] := 1;
        END IF;
    END LOOP;

    -- The committed redemptions of the batch's orderIds, read after phase 2
    -- so that an orderId another transaction committed meanwhile is seen.
    -- An orderId this call inserted is no other transaction's: when every
    -- one was, there is nothing to read. The placeholders' orderIds are
    -- distinct and among the batch's, so as many as the batch has elements
    -- means every one (array containment would compare every pair).
    IF cardinality(k_orders) = v_n THEN
        r_orders := '{}';
        r_rows := '{}';
    ELSE
        EXECUTE 'SELECT coalesce(array_agg(x.order_id), ''{}''), coalesce(array_agg(x), ''{}'')
                 FROM voucher_redemption x WHERE x.order_id = ANY ($1) AND NOT (x.order_id = ANY ($2))'
        INTO r_orders, r_rows USING p_orders, k_orders;
    END IF;

    -- Each element's placeholder and counter, found by one join rather
    -- than by searching the arrays once per element (every pair compared).
    SELECT coalesce(array_agg(k.i::integer ORDER BY e.u_n), '{}'), coalesce(array_agg(c.i::integer ORDER BY e.u_n), '{}')
    INTO e_k, e_c
    FROM unnest(p_orders, p_customers) WITH ORDINALITY AS e(u_order, u_customer, u_n)
    LEFT JOIN unnest(k_orders) WITH ORDINALITY AS k(u_order, i) ON k.u_order = e.u_order
    LEFT JOIN unnest(c_ids) WITH ORDINALITY AS c(u_customer, i) ON c.u_customer = e.u_customer;

    <<attempt>>
    LOOP
        -- 4. The decisions, in arrival order, in the order of checks of
        -- voucherd_reserve_one: known orderId, eligibility, stock, per-user limit.
        k_owner := array_fill(0, ARRAY[cardinality(k_orders)]);
        c_held := c_start;
        v_taken := 0;
        b_left := b.cap - b.held;
        b_taken := 0;
        e_discount := array_fill(0::bigint, ARRAY[v_n]);
        e_error := array_fill(''::text, ARRAY[v_n]);
        e_ans_reason := array_fill(''::text, ARRAY[v_n]);
        e_message := array_fill(''::text, ARRAY[v_n]);
        e_replay := array_fill(false, ARRAY[v_n]);
        e_row := array_fill(NULL::voucher_redemption, ARRAY[v_n]);
        FOR v_i IN 1..v_n LOOP
            -- A committed redemption: a replay or a conflict; takes nothing.
            v_j := array_position(r_orders, p_orders[v_i]);
            IF v_j IS NOT NULL THEN
                r := r_rows[v_j];
                e_error[v_i] := voucherd_order_verdict(r, p_code, p_customers[v_i]);
                IF e_error[v_i] = '' THEN
                    e_row[v_i] := r;
                    e_replay[v_i] := true;
                ELSE
                    e_message[v_i] := voucherd_order_facts(r, p_code);
                END IF;
                CONTINUE;
            END IF;

            -- An orderId an earlier element of this batch took: the same.
            v_k := e_k[v_i];
            IF v_k IS NOT NULL AND k_owner[v_k] > 0 THEN
                r := e_row[k_owner[v_k]];
                e_error[v_i] := voucherd_order_verdict(r, p_code, p_customers[v_i]);
                IF e_error[v_i] = '' THEN
                    e_row[v_i] := r;
                    e_replay[v_i] := true;
                ELSE
                    e_message[v_i] := voucherd_order_facts(r, p_code);
                END IF;
                CONTINUE;
            END IF;

            IF NOT e_ok[v_i] THEN
                e_error[v_i] := 'NOT_ELIGIBLE';
                e_ans_reason[v_i] := e_reason[v_i];
                e_message[v_i] := voucherd_eligibility_facts(v, p_amounts[v_i], p_currencies[v_i]);
                CONTINUE;
            END IF;
            IF v_taken >= v_room THEN
                -- HELD_OUT or OUT_OF_STOCK, told apart after the decisions.
                e_error[v_i] := 'OUT_OF_STOCK';
                e_message[v_i] := format('voucher=%s', p_code);
                CONTINUE;
            END IF;
            v_want := voucherd_discount(v.discount_amount, v.discount_percent_bp, v.max_discount_amount, p_amounts[v_i]);
            e_discount[v_i] := v_want;
            IF b.cap IS NOT NULL AND NOT (b_left > 0 AND v_want <= b_left) THEN
                IF b.clip AND b_left > 0 THEN
                    e_discount[v_i] := b_left;
                ELSE
                    e_error[v_i] := 'BUDGET_EXCEEDED';
                    e_message[v_i] := format('voucher=%s budget=%s', p_code, greatest(b_left, 0));
                    CONTINUE;
                END IF;
            END IF;
            v_m := e_c[v_i];
            IF v_k IS NULL OR v_m IS NULL THEN
                RAISE EXCEPTION USING ERRCODE = 'VD900',
                    MESSAGE = format('order %s of a batch of voucher %s was not locked', p_orders[v_i], p_code);
            END IF;
            IF c_held[v_m] >= v.per_user_limit THEN
                e_error[v_i] := 'ALREADY_USED';
                e_message[v_i] := voucherd_quota_facts(p_code, p_customers[v_i], v.per_user_limit);
                CONTINUE;
            END IF;
            c_held[v_m] := c_held[v_m] + 1;
            k_owner[v_k] := v_i;
            v_taken := v_taken + 1;
            IF b.cap IS NOT NULL THEN
                b_left := b_left - e_discount[v_i];
                b_taken := b_taken + e_discount[v_i];
            END IF;
            e_row[v_i] := ROW(p_orders[v_i], p_code, voucherd_customer_legacy(p_customers[v_i]), p_amounts[v_i],
                              e_discount[v_i],
                              'RESERVED', p_nows[v_i], p_nows[v_i], p_nows[v_i] + p_ttl, NULL,
                              p_customers[v_i], NULL, NULL)::voucher_redemption;
        END LOOP;

        -- 5. The rows as decided. A placeholder is usually kept as inserted or
        -- deleted; it is rewritten only when a later element with the same
        -- orderId took the use its first eligible element did not get.
        v_delete := '{}';
        FOR v_k IN 1..coalesce(cardinality(k_orders), 0) LOOP
            CONTINUE WHEN k_owner[v_k] = k_db[v_k];
            IF k_owner[v_k] = 0 THEN
                v_delete := v_delete || k_orders[v_k];
            ELSIF k_db[v_k] = 0 THEN
                -- The decisions are only ever made again with less stock, so
                -- a deleted placeholder is never wanted back.
                RAISE EXCEPTION USING ERRCODE = 'VD900',
                    MESSAGE = format('order %s of a batch of voucher %s was deleted, then taken', k_orders[v_k], p_code);
            ELSE
                r := e_row[k_owner[v_k]];
                UPDATE voucher_redemption x
                SET customer = r.customer, customer_id = r.customer_id, order_amount = r.order_amount,
                    discount_amount = r.discount_amount,
                    created_at = r.created_at, updated_at = r.updated_at, expires_at = r.expires_at
                WHERE x.order_id = r.order_id;
            END IF;
            k_db[v_k] := k_owner[v_k];
        END LOOP;
        -- A discount the budget clipped, on a placeholder kept as inserted.
        IF b.clip THEN
            FOR v_k IN 1..coalesce(cardinality(k_orders), 0) LOOP
                CONTINUE WHEN k_owner[v_k] = 0;
                r := e_row[k_owner[v_k]];
                UPDATE voucher_redemption x SET discount_amount = r.discount_amount
                WHERE x.order_id = r.order_id AND x.discount_amount <> r.discount_amount;
            END LOOP;
        END IF;
        IF cardinality(v_delete) > 0 THEN
            EXECUTE 'DELETE FROM voucher_redemption x WHERE x.order_id = ANY ($1)' USING v_delete;
        END IF;
        -- A counter created for a customer who took nothing goes again, as
        -- voucherd_reserve_one's rollback would leave no row.
        v_delete_customers := '{}';
        FOR v_m IN 1..coalesce(cardinality(c_ids), 0) LOOP
            IF c_new[v_m] AND c_held[v_m] = 0 THEN
                v_delete_customers := v_delete_customers || c_ids[v_m];
                c_new[v_m] := false;
                c_db[v_m] := 0;
            END IF;
        END LOOP;
        IF c_held IS DISTINCT FROM c_db THEN
            EXECUTE 'UPDATE voucher_customer_usage u SET held = d.u_held
                     FROM unnest($2::text[], $3::integer[], $4::integer[]) AS d(u_customer, u_held, u_db)
                     WHERE u.voucher_code = $1 AND u.customer = ANY ($2)
                       AND u.customer = d.u_customer AND d.u_held <> d.u_db'
            USING p_code, c_ids, c_held, c_db;
            c_db := c_held;
        END IF;
        IF cardinality(v_delete_customers) > 0 THEN
            EXECUTE 'DELETE FROM voucher_customer_usage u WHERE u.voucher_code = $1 AND u.customer = ANY ($2)'
            USING p_code, v_delete_customers;
        END IF;

        -- 6. The hot row, last, once for the batch. Its conditions are
        -- evaluated on the latest version of the row.
        EXIT attempt WHEN v_taken = 0;
        UPDATE voucher x SET used_count = x.used_count + v_taken
        WHERE x.code = p_code
          AND x.used_count + v_taken <= x.total_limit
          AND NOT x.disabled
          AND x.starts_at = v.starts_at AND x.ends_at = v.ends_at
          AND x.min_order_amount = v.min_order_amount AND x.per_user_limit = v.per_user_limit
        RETURNING x.used_count, x.total_limit INTO v_used, v_total;
        EXIT attempt WHEN FOUND;

        SELECT x.* INTO v_locked FROM voucher x WHERE x.code = p_code FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'VD900', MESSAGE = format('voucher %s vanished', p_code);
        END IF;
        IF (v_locked.starts_at, v_locked.ends_at, v_locked.min_order_amount, v_locked.per_user_limit, v_locked.disabled)
           IS DISTINCT FROM (v.starts_at, v.ends_at, v.min_order_amount, v.per_user_limit, v.disabled) THEN
            RAISE EXCEPTION USING ERRCODE = 'VD003',
                MESSAGE = format('voucher %s changed under a batch of reservations', p_code);
        END IF;
        v_room := greatest(v_locked.total_limit - v_locked.used_count, 0);
        IF v_taken <= v_room THEN
            -- The update above ran on a snapshot older than the row now
            -- locked (a PATCH raised total_limit in between): the room is
            -- there, and the row cannot change any more.
            UPDATE voucher x SET used_count = x.used_count + v_taken WHERE x.code = p_code
            RETURNING x.used_count, x.total_limit INTO v_used, v_total;
            EXIT attempt;
        END IF;
    END LOOP;

    -- The budget's counter, raised by the discounts granted: its row is
    -- locked since 2b, so the decisions' read of it stands (the CHECK is the
    -- last line of defence). The trigger counts this transaction's later
    -- writes again.
    IF b_taken > 0 THEN
        UPDATE voucher_limit l SET held = l.held + b_taken
        WHERE l.voucher_code = p_code AND l.kind = 'budget' AND l.period_start = '-infinity';
    END IF;
    IF b_has THEN
        PERFORM set_config('voucherd.limits_by_caller', 'off', true);
    END IF;
    PERFORM set_config('voucherd.reserved_wanted', '', true);

    -- Stock rejections: HELD_OUT while some use is RESERVED. The rows now
    -- match the decisions, so the holds read here are the committed ones
    -- plus those this batch granted, which all come before any element
    -- refused for stock: what each element would see run on its own, in
    -- order (voucherd_reserve_one).
    IF 'OUT_OF_STOCK' = ANY (e_error) OR 'BUDGET_EXCEEDED' = ANY (e_error) THEN
        v_hold := voucherd_earliest_hold(p_code);
    END IF;

    FOR v_i IN 1..v_n LOOP
        o_n := v_i;
        o_retry_ms := 0;
        o_used := 0;
        o_total := 0;
        IF e_error[v_i] = 'OUT_OF_STOCK' AND v_hold IS NOT NULL THEN
            e_error[v_i] := 'HELD_OUT';
            o_retry_ms := voucherd_retry_ms(v_hold, p_nows[v_i]);
        END IF;
        IF e_error[v_i] = 'BUDGET_EXCEEDED' AND v_hold IS NOT NULL THEN
            e_message[v_i] := e_message[v_i] || format(' retry=%s', voucherd_retry_ms(v_hold, p_nows[v_i]));
        END IF;
        IF e_error[v_i] = '' AND NOT e_replay[v_i] THEN
            -- The grants in arrival order, each with the count right
            -- after it.
            v_granted := v_granted + 1;
            o_used := v_used - v_taken + v_granted;
            o_total := v_total;
        END IF;
        o_replay := e_replay[v_i];
        o_error := e_error[v_i];
        o_reason := e_ans_reason[v_i];
        o_message := e_message[v_i];
        IF e_error[v_i] = '' THEN
            r := e_row[v_i];
            o_order_id := r.order_id;
            o_voucher_code := r.voucher_code;
            o_customer := r.customer;
            o_order_amount := r.order_amount;
            o_discount_amount := r.discount_amount;
            o_status := r.status;
            o_created_at := r.created_at;
            o_updated_at := r.updated_at;
            o_expires_at := r.expires_at;
        ELSE
            o_order_id := p_orders[v_i];
            o_voucher_code := p_code;
            o_customer := p_customers[v_i];
            o_order_amount := p_amounts[v_i];
            o_discount_amount := 0;
            o_status := '';
            o_created_at := p_nows[v_i];
            o_updated_at := p_nows[v_i];
            o_expires_at := p_nows[v_i];
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
