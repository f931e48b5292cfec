-- voucherd_apply_replace is voucherd_apply_replace_code for a voucher's
-- replacement (no campaign code): the entry point of releases that knew no
-- flash campaign, kept with its arguments and result columns.
CREATE OR REPLACE FUNCTION voucherd_apply_replace(
    p_order text, p_code text, p_customer text, p_amount bigint, p_discount bigint,
    p_reserved_at timestamptz, p_expires_at timestamptz, p_replaces text,
    OUT o_inserted boolean, OUT o_voucher_code text, OUT o_customer text)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT x.o_inserted, x.o_voucher_code, x.o_customer INTO o_inserted, o_voucher_code, o_customer
    FROM voucherd_apply_replace_code(p_order, p_code, p_customer, p_amount, p_discount,
                                     p_reserved_at, p_expires_at, p_replaces, NULL) AS x;
END
$$;
