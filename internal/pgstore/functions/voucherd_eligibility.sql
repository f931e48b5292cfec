-- voucherd_eligibility is the rule of voucher.CheckEligible with the caller's
-- clock: '' when an order of p_amount in p_currency (NULL or '': none) by
-- p_customer may use v at p_now, else the NOT_ELIGIBLE reason. Its facts are
-- voucherd_eligibility_facts.
CREATE OR REPLACE FUNCTION voucherd_eligibility(v voucher, p_amount bigint, p_now timestamptz, p_customer text,
                                                p_currency text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN v.disabled THEN 'DISABLED'
        WHEN p_now < v.starts_at THEN 'NOT_STARTED'
        WHEN p_now >= v.ends_at THEN 'EXPIRED'
        WHEN v.bound_customer IS NOT NULL AND p_customer IS DISTINCT FROM v.bound_customer THEN 'CUSTOMER_MISMATCH'
        WHEN v.currency IS NOT NULL AND nullif(p_currency, '') IS DISTINCT FROM v.currency THEN 'CURRENCY_MISMATCH'
        WHEN p_amount < v.min_order_amount THEN 'ORDER_AMOUNT_TOO_LOW'
        ELSE ''
    END
$$;
