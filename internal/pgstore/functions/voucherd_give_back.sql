-- voucherd_give_back returns one held use of a customer to the voucher, in
-- lock order (customer row, then voucher row).
CREATE OR REPLACE FUNCTION voucherd_give_back(p_code text, p_customer text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE voucher_customer_usage u SET held = u.held - 1
    WHERE u.voucher_code = p_code AND u.customer = p_customer;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'VD900',
            MESSAGE = format('no usage counter for customer %s of voucher %s', p_customer, p_code);
    END IF;
    UPDATE voucher v SET used_count = v.used_count - 1 WHERE v.code = p_code;
END
$$;
