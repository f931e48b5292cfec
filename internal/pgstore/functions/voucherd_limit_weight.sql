-- voucherd_limit_weight is what a held redemption of p_discount weighs
-- against a limit of kind p_kind; a released one weighs nothing. The one
-- place a kind of limit says what it counts. A weight may depend only on
-- whether the redemption holds a use and on its discount: the update
-- trigger (migration 020) fires only when one of them changes.
CREATE OR REPLACE FUNCTION voucherd_limit_weight(p_kind text, p_status text, p_discount bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_status = 'RELEASED' OR p_status IS NULL THEN 0
                WHEN p_kind = 'budget' THEN p_discount
                ELSE 1 END
$$;
