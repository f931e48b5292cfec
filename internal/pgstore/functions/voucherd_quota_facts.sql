-- voucherd_quota_facts are the facts of an ALREADY_USED rejection: customer
-- p_customer holds p_limit uses of p_code, its per-user limit.
CREATE OR REPLACE FUNCTION voucherd_quota_facts(p_code text, p_customer text, p_limit integer)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT format('voucher=%s customer=%s limit=%s', p_code, p_customer, p_limit)
$$;
