-- voucherd_reject_stock rejects a reservation of a voucher with no free
-- use: HELD_OUT while some use of it other than p_except's is RESERVED
-- (VD004: MESSAGE 'HELD_OUT', DETAIL the facts, HINT the milliseconds until
-- the earliest such hold expires), else OUT_OF_STOCK. The batch decides the
-- same with voucherd_earliest_hold per element.
CREATE OR REPLACE FUNCTION voucherd_reject_stock(p_code text, p_now timestamptz, p_except text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_hold timestamptz := voucherd_earliest_hold(p_code, p_except);
BEGIN
    IF v_hold IS NULL THEN
        PERFORM voucherd_reject('OUT_OF_STOCK', format('voucher=%s', p_code));
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'VD004', MESSAGE = 'HELD_OUT', DETAIL = format('voucher=%s', p_code),
        HINT = voucherd_retry_ms(v_hold, p_now)::text;
END
$$;
