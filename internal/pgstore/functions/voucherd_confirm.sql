-- voucherd_confirm moves a RESERVED redemption to CONFIRMED. A CONFIRMED or
-- RELEASED one is returned as it is. A RESERVED one past its expiry is
-- released right here, as the sweep would, and returned RELEASED with
-- expired = true. The row lock and the status re-read make a confirm racing
-- the sweep end in exactly one terminal state.
-- p_code is the redemption's code: the campaign code it was made with, else
-- its voucher's.
CREATE OR REPLACE FUNCTION voucherd_confirm(
    p_code text, p_order text, p_now timestamptz,
    OUT redemption voucher_redemption, OUT expired boolean)
LANGUAGE plpgsql AS $$
DECLARE
    r voucher_redemption%ROWTYPE;
BEGIN
    expired := false;
    SELECT x.* INTO r FROM voucher_redemption x
    WHERE x.order_id = p_order AND coalesce(x.code, x.voucher_code) = p_code
    FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM voucherd_reject('RESERVATION_NOT_FOUND', format('voucher=%s order=%s', p_code, p_order));
    END IF;

    IF r.status = 'RESERVED' THEN
        IF r.expires_at <= p_now THEN
            UPDATE voucher_redemption x SET status = 'RELEASED', updated_at = p_now
            WHERE x.order_id = p_order RETURNING x.* INTO r;
            PERFORM voucherd_give_back(r.voucher_code, r.customer);
            expired := true;
        ELSE
            UPDATE voucher_redemption x SET status = 'CONFIRMED', updated_at = p_now
            WHERE x.order_id = p_order RETURNING x.* INTO r;
        END IF;
    END IF;
    redemption := r;
END
$$;
