-- voucherd_earliest_hold returns the expiry of p_code's RESERVED hold that
-- expires first, ignoring order p_except; NULL when there is none. plpgsql,
-- not sql: PostgreSQL 15 plans a sql function with a FROM clause again in
-- every transaction, a plpgsql one once per session, and this runs for every
-- rejected reservation.
CREATE OR REPLACE FUNCTION voucherd_earliest_hold(p_code text, p_except text DEFAULT NULL)
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT x.expires_at FROM voucher_redemption x
            WHERE x.voucher_code = p_code AND x.status = 'RESERVED' AND x.order_id IS DISTINCT FROM p_except
            ORDER BY x.expires_at
            LIMIT 1);
END
$$;
