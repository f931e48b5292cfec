-- voucherd_eligibility_facts are the facts of a NOT_ELIGIBLE rejection of an
-- order of p_amount in p_currency for v, whatever the reason; times as Go's
-- time.RFC3339 in UTC. The currencies are told only for a voucher that has
-- one; the customer a voucher is bound to never is.
CREATE OR REPLACE FUNCTION voucherd_eligibility_facts(v voucher, p_amount bigint, p_currency text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT format('voucher=%s starts=%s ends=%s amount=%s min=%s', v.code,
                  to_char(v.starts_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                  to_char(v.ends_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                  p_amount, v.min_order_amount)
        || CASE WHEN v.currency IS NULL THEN ''
                ELSE format(' vcurrency=%s', v.currency) || coalesce(' currency=' || nullif(p_currency, ''), '') END
$$;
