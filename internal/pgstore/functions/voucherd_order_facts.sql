-- voucherd_order_facts are the facts of a voucherd_order_verdict rejection:
-- the voucher asked for, the orderId and the voucher it already uses.
CREATE OR REPLACE FUNCTION voucherd_order_facts(r voucher_redemption, p_code text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT format('voucher=%s order=%s uses=%s', p_code, r.order_id, coalesce(r.code, r.voucher_code))
$$;
