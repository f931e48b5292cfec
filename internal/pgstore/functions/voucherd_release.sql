-- voucherd_release moves a held redemption to RELEASED and gives its use back
-- to the customer and the voucher. A RELEASED one is returned with
-- released = false.
-- p_code is the redemption's code: the campaign code it was made with, else
-- its voucher's.
CREATE OR REPLACE FUNCTION voucherd_release(
    p_code text, p_order text, p_now timestamptz,
    OUT redemption voucher_redemption, OUT released boolean)
LANGUAGE plpgsql AS $$
DECLARE
    r voucher_redemption%ROWTYPE;
BEGIN
    SELECT x.* INTO r FROM voucher_redemption x
    WHERE x.order_id = p_order AND coalesce(x.code, x.voucher_code) = p_code
    FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM voucherd_reject('RESERVATION_NOT_FOUND', format('voucher=%s order=%s', p_code, p_order));
    END IF;

    IF r.status = 'RELEASED' THEN
        redemption := r;
        released := false;
        RETURN;
    END IF;

    -- The row first: its trigger gives the limit counters back before the
    -- customer and voucher rows are locked (lock order, docs/rules.md).
    UPDATE voucher_redemption x SET status = 'RELEASED', updated_at = p_now
    WHERE x.order_id = p_order RETURNING x.* INTO r;
    PERFORM voucherd_give_back(r.voucher_code, r.customer);
    redemption := r;
    released := true;
END
$$;
