-- voucherd_extend moves the expiry of a RESERVED redemption to p_until,
-- never earlier than it is and never later than the start of its hold
-- (held_since, which a replacement keeps; else its creation) plus p_max.
-- A CONFIRMED or RELEASED one is returned as it is. A RESERVED one past its
-- expiry is released right here, as voucherd_confirm does, and returned
-- RELEASED with expired = true. The row lock is the one the expiry sweep
-- takes (it skips locked rows and re-checks the expiry on the latest
-- version), so a sweep racing an extension either releases the row first,
-- and the extension finds it RELEASED, or finds it extended.
-- p_code is the redemption's code: the campaign code it was made with, else
-- its voucher's.
CREATE OR REPLACE FUNCTION voucherd_extend(
    p_code text, p_order text, p_now timestamptz, p_until timestamptz, p_max interval,
    OUT redemption voucher_redemption, OUT expired boolean)
LANGUAGE plpgsql AS $$
DECLARE
    r voucher_redemption%ROWTYPE;
    v_new timestamptz;
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
            v_new := greatest(r.expires_at, least(p_until, coalesce(r.held_since, r.created_at) + p_max));
            IF v_new > r.expires_at THEN
                UPDATE voucher_redemption x SET expires_at = v_new, updated_at = p_now
                WHERE x.order_id = p_order RETURNING x.* INTO r;
            END IF;
        END IF;
    END IF;
    redemption := r;
END
$$;
