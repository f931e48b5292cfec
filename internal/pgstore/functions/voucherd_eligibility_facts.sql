-- voucherd_eligibility_facts are the facts of a NOT_ELIGIBLE rejection of an
-- order of p_amount for v, whatever the reason; times as Go's time.RFC3339
-- in UTC.
CREATE OR REPLACE FUNCTION voucherd_eligibility_facts(v voucher, p_amount bigint)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT format('voucher=%s starts=%s ends=%s amount=%s min=%s', v.code,
                  to_char(v.starts_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                  to_char(v.ends_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                  p_amount, v.min_order_amount)
$$;
