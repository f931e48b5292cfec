-- voucherd_expire releases up to p_limit RESERVED redemptions due at p_now,
-- oldest first, and returns them. SKIP LOCKED lets concurrent sweepers split
-- the work; the status re-check under the row lock makes each row released
-- once. Counters are given back per customer and per voucher, in lock order;
-- the limit counters (voucher_limit) too, sorted by voucher, before the
-- customers' (the trigger voucherd_limit_count would take them in the order
-- the rows expire, so the sweep counts them itself:
-- voucherd.limits_by_caller, for the call); a 'window' row gets back the
-- uses taken in its occurrence only.
-- The lookups by the array of released orderIds run through EXECUTE, planned
-- for the table's current size on each call, for the reason
-- voucherd_apply_reserved_codes gives.
CREATE OR REPLACE FUNCTION voucherd_expire(p_now timestamptz, p_limit integer)
RETURNS SETOF voucher_redemption LANGUAGE plpgsql AS $$
DECLARE
    v_ids text[];
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
        RETURNING x.order_id
    )
    SELECT coalesce(array_agg(done.order_id), '{}') INTO v_ids FROM done;

    IF cardinality(v_ids) = 0 THEN
        PERFORM set_config('voucherd.limits_by_caller', 'off', true);
        RETURN;
    END IF;

    FOR c IN EXECUTE
        'SELECT DISTINCT x.voucher_code FROM voucher_redemption x
         WHERE x.order_id = ANY ($1) ORDER BY x.voucher_code' USING v_ids
    LOOP
        EXECUTE
            'UPDATE voucher_limit l
             SET held = l.held - (SELECT coalesce(sum(voucherd_limit_weight(l.kind, ''RESERVED'', x.discount_amount)), 0)
                                  FROM voucher_redemption x
                                  WHERE x.order_id = ANY ($1) AND x.voucher_code = l.voucher_code
                                    AND (l.kind <> ''window'' OR x.window_start = l.period_start))
             WHERE l.voucher_code = $2' USING v_ids, c.voucher_code;
    END LOOP;
    PERFORM set_config('voucherd.limits_by_caller', 'off', true);

    FOR c IN EXECUTE
        'SELECT x.voucher_code, x.customer, count(*)::integer AS n
         FROM voucher_redemption x WHERE x.order_id = ANY ($1)
         GROUP BY x.voucher_code, x.customer
         ORDER BY x.voucher_code, x.customer' USING v_ids
    LOOP
        UPDATE voucher_customer_usage u SET held = u.held - c.n
        WHERE u.voucher_code = c.voucher_code AND u.customer = c.customer;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'VD900',
                MESSAGE = format('no usage counter for customer %s of voucher %s', c.customer, c.voucher_code);
        END IF;
    END LOOP;

    FOR c IN EXECUTE
        'SELECT x.voucher_code, count(*)::integer AS n
         FROM voucher_redemption x WHERE x.order_id = ANY ($1)
         GROUP BY x.voucher_code
         ORDER BY x.voucher_code' USING v_ids
    LOOP
        UPDATE voucher v SET used_count = v.used_count - c.n WHERE v.code = c.voucher_code;
    END LOOP;

    RETURN QUERY EXECUTE
        'SELECT x.* FROM voucher_redemption x WHERE x.order_id = ANY ($1)
         ORDER BY x.expires_at, x.order_id' USING v_ids;
END
$$;
