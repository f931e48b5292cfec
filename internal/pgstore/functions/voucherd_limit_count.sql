-- voucherd_limit_count is the row trigger voucher_redemption_limits_update
-- (migration 020; inserts and deletes are counted per statement by
-- voucherd_limit_count_rows, migration 021, the same way): it moves
-- every voucher_limit counter of the redemption's voucher by what the
-- redemption weighs now minus what it weighed before (voucherd_limit_weight),
-- in the statement that changed it, so that no writer (reservation, batch,
-- Kafka consumer, release, expiry, confirmation of an expired hold,
-- replacement) can forget a counter. A counter pushed over its cap fails
-- the statement with voucher_limit_held_le_cap (23514). A voucher with no
-- limit row costs one primary-key probe. Lock order: a writer changes its
-- redemption rows before the customer counters and the voucher row, so the
-- limit rows are locked between them (docs/rules.md). While
-- voucherd.limits_by_caller is on (set by voucherd_reserve_batch for its
-- own writes, which it counts itself) it does nothing. Of the 'window'
-- rows only the occurrence the redemption was taken in (window_start)
-- counts it.
CREATE OR REPLACE FUNCTION voucherd_limit_count()
RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_code text;
    v_old_status text;
    v_old_discount bigint := 0;
    v_new_status text;
    v_new_discount bigint := 0;
    v_window timestamptz;
BEGIN
    IF TG_OP = 'DELETE' OR TG_OP = 'UPDATE' THEN
        v_code := OLD.voucher_code;
        v_old_status := OLD.status;
        v_old_discount := OLD.discount_amount;
        v_window := OLD.window_start;
    END IF;
    IF TG_OP = 'INSERT' OR TG_OP = 'UPDATE' THEN
        v_code := NEW.voucher_code;
        v_new_status := NEW.status;
        v_new_discount := NEW.discount_amount;
        v_window := NEW.window_start;
    END IF;
    IF (v_old_status IS NULL OR v_old_status = 'RELEASED') AND (v_new_status IS NULL OR v_new_status = 'RELEASED')
       OR current_setting('voucherd.limits_by_caller', true) = 'on' THEN
        RETURN NULL;
    END IF;
    UPDATE voucher_limit l
    SET held = l.held + voucherd_limit_weight(l.kind, v_new_status, v_new_discount)
                      - voucherd_limit_weight(l.kind, v_old_status, v_old_discount)
    WHERE l.voucher_code = v_code
      AND (l.kind <> 'window' OR l.period_start = v_window)
      AND voucherd_limit_weight(l.kind, v_new_status, v_new_discount)
          <> voucherd_limit_weight(l.kind, v_old_status, v_old_discount);
    RETURN NULL;
END
$$;
