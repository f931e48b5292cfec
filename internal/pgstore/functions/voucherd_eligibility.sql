-- voucherd_eligibility is the rule of voucher.CheckEligible with the caller's
-- clock: '' when an order of p_amount may use v at p_now, else the
-- NOT_ELIGIBLE reason. Its facts are voucherd_eligibility_facts.
CREATE OR REPLACE FUNCTION voucherd_eligibility(v voucher, p_amount bigint, p_now timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN v.disabled THEN 'DISABLED'
        WHEN p_now < v.starts_at THEN 'NOT_STARTED'
        WHEN p_now >= v.ends_at THEN 'EXPIRED'
        WHEN p_amount < v.min_order_amount THEN 'ORDER_AMOUNT_TOO_LOW'
        ELSE ''
    END
$$;
