-- voucherd_window_row creates, when voucher p_code has a quota per window,
-- the counter row of the occurrence starting at p_window (cap: the
-- voucher's window_limit; nothing held) unless it exists, and locks it
-- (NO KEY UPDATE). Called after the voucher's other limit rows are locked:
-- the current occurrence's key sorts after theirs (lock order,
-- docs/rules.md). A concurrent first reservation of the occurrence waits
-- for the other's insert and then locks the row it committed. Returns
-- whether the occurrence has a row.
CREATE OR REPLACE FUNCTION voucherd_window_row(p_code text, p_window timestamptz)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_cap integer;
BEGIN
    IF p_window IS NULL THEN
        RETURN false;
    END IF;
    SELECT x.window_limit INTO v_cap FROM voucher x WHERE x.code = p_code;
    IF v_cap IS NULL THEN
        RETURN false;
    END IF;
    INSERT INTO voucher_limit (voucher_code, kind, period_start, cap) VALUES (p_code, 'window', p_window, v_cap)
    ON CONFLICT ON CONSTRAINT voucher_limit_pkey DO NOTHING;
    PERFORM 1 FROM voucher_limit x WHERE x.voucher_code = p_code AND x.kind = 'window' AND x.period_start = p_window
    FOR NO KEY UPDATE;
    RETURN true;
END
$$;
