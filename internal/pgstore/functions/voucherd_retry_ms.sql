-- voucherd_retry_ms is the number of milliseconds from p_now to p_at,
-- rounded up, 0 when p_at is past. A single expression, which the planner
-- inlines into its callers' cached plans.
CREATE OR REPLACE FUNCTION voucherd_retry_ms(p_at timestamptz, p_now timestamptz)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT greatest(ceil(extract(epoch FROM (p_at - p_now)) * 1000), 0)::bigint
$$;
