-- 022_event_conditions_plpgsql: the two functions the event triggers'
-- WHEN conditions call (migration 019) keep their plans for the session.
--
-- A LANGUAGE sql function that reads a table is not inlined, and PostgreSQL
-- parses and plans its body again for every statement that calls it: every
-- insert of redemptions paid that for voucherd_event_reserved_wanted, and
-- every update of a voucher's used_count for voucherd_event_threshold, on
-- top of running them per row. PL/pgSQL keeps the plan of its statement per
-- connection; each still runs per row, as the triggers' WHEN needs
-- (docs/storage.md: about 3 µs of PostgreSQL CPU per redemption written,
-- most of what the reserved event's trigger cost when no one subscribes).
-- Same signatures, results and volatility: a STABLE PL/pgSQL function reads
-- with its caller's snapshot, as the SQL one did.
CREATE OR REPLACE FUNCTION voucherd_event_reserved_wanted() RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT s.reserved_wanted FROM voucherd_event_settings s);
END
$$;

CREATE OR REPLACE FUNCTION voucherd_event_threshold(p_total_limit integer) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT CASE WHEN s.low_stock_share < 0 THEN 0
                        ELSE greatest(ceil(s.low_stock_share * p_total_limit - 1e-9)::bigint, 1) END
            FROM voucherd_event_settings s);
END
$$;
