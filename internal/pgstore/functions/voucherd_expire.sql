-- voucherd_expire releases up to p_limit RESERVED redemptions due at p_now,
-- oldest first, and returns them. SKIP LOCKED lets concurrent sweepers split
-- the work; the status re-check under the row lock makes each row released
-- once. Counters are given back per customer and per voucher, in lock order;
-- the limit counters (voucher_limit) too, sorted by voucher, before the
-- customers' (the trigger voucherd_limit_count would take them in the order
-- the rows expire, so the sweep counts them itself:
-- voucherd.limits_by_caller, for the call); a 'window' row gets back the
-- uses taken in its occurrence only.
-- The released rows are kept from the UPDATE's RETURNING, so every count
-- below is taken from them, with no lookup by the array of orderIds (no
-- plan to make per call, no index probe per row and statement).
CREATE OR REPLACE FUNCTION voucherd_expire(p_now timestamptz, p_limit integer)
RETURNS SETOF voucher_redemption LANGUAGE plpgsql AS $$
DECLARE
    v_rows voucher_redemption[];
    c record;
BEGIN
    PERFORM set_config('voucherd.limits_by_caller', 'on', true);
    WITH due AS (
        SELECT d.order_id FROM voucher_redemption d
        WHERE d.status = 'RESERVED' AND d.expires_at <= p_now
        ORDER BY d.expires_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ), done AS (
        UPDATE voucher_redemption x SET status = 'RELEASED', updated_at = p_now
        FROM due WHERE x.order_id = due.order_id
        RETURNING x AS r
    )
    SELECT coalesce(array_agg(done.r), '{}') INTO v_rows FROM done;

    IF cardinality(v_rows) = 0 THEN
        PERFORM set_config('voucherd.limits_by_caller', 'off', true);
        RETURN;
    END IF;

    FOR c IN SELECT DISTINCT x.voucher_code COLLATE "C" AS voucher_code FROM unnest(v_rows) AS x ORDER BY 1
    LOOP
        UPDATE voucher_limit l
        SET held = l.held - (SELECT coalesce(sum(voucherd_limit_weight(l.kind, 'RESERVED', x.discount_amount)), 0)
                             FROM unnest(v_rows) AS x
                             WHERE x.voucher_code = l.voucher_code
                               AND (l.kind <> 'window' OR x.window_start = l.period_start))
        WHERE l.voucher_code = c.voucher_code;
    END LOOP;
    PERFORM set_config('voucherd.limits_by_caller', 'off', true);

    FOR c IN SELECT x.voucher_code, x.customer, count(*)::integer AS n
             FROM unnest(v_rows) AS x
             GROUP BY x.voucher_code, x.customer
             ORDER BY x.voucher_code COLLATE "C", x.customer COLLATE "C"
    LOOP
        UPDATE voucher_customer_usage u SET held = u.held - c.n
        WHERE u.voucher_code = c.voucher_code AND u.customer = c.customer;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'VD900',
                MESSAGE = format('no usage counter for customer %s of voucher %s', c.customer, c.voucher_code);
        END IF;
    END LOOP;

    FOR c IN SELECT x.voucher_code, count(*)::integer AS n
             FROM unnest(v_rows) AS x
             GROUP BY x.voucher_code
             ORDER BY x.voucher_code COLLATE "C"
    LOOP
        UPDATE voucher v SET used_count = v.used_count - c.n WHERE v.code = c.voucher_code;
    END LOOP;

    RETURN QUERY SELECT x.* FROM unnest(v_rows) AS x ORDER BY x.expires_at, x.order_id;
END
$$;
