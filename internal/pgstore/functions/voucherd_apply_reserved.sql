-- voucherd_apply_reserved is voucherd_apply_reserved_codes for events of
-- vouchers only (no campaign code): the entry point of releases that knew
-- no flash campaign, kept with its arguments and result columns.
CREATE OR REPLACE FUNCTION voucherd_apply_reserved(
    p_order_ids text[], p_codes text[], p_customers text[], p_amounts bigint[],
    p_discounts bigint[], p_reserved_at timestamptz[], p_expires_at timestamptz[])
RETURNS TABLE (o_order_id text, o_inserted boolean, o_voucher_code text, o_customer text)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
        SELECT x.o_order_id, x.o_inserted, x.o_voucher_code, x.o_customer
        FROM voucherd_apply_reserved_codes(p_order_ids, p_codes, p_customers, p_amounts, p_discounts,
                                           p_reserved_at, p_expires_at, NULL) AS x;
END
$$;
