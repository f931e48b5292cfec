-- voucherd_reject raises a rejection the Go adapter turns into *voucher.Error.
--
-- The functions answer with codes and facts, never with wording: SQLSTATE
-- VD001, MESSAGE = the voucher.ErrorCode, DETAIL = the facts the message is
-- worded from, HINT = the NOT_ELIGIBLE reason (or ''). Facts are
-- space-separated key=value pairs (keys: voucher, order, uses, customer,
-- limit, starts, ends, amount, min, vcurrency, currency, budget (what is left
-- of a money budget), retry (milliseconds until a hold may free some), window
-- (1: the quota of the occurrence refused, not totalLimit); no
-- value holds a space or '='); the Go
-- side words every message from one table (voucher.Reject). HELD_OUT is
-- VD004 (voucherd_reject_stock), VD002 a Kafka batch over a per-user limit,
-- VD003 a batch to retry one by one, VD900 counters that disagree with the
-- rows (a bug, reported as INTERNAL).
CREATE OR REPLACE FUNCTION voucherd_reject(p_code text, p_facts text, p_reason text DEFAULT '')
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'VD001', MESSAGE = p_code, DETAIL = p_facts, HINT = p_reason;
END
$$;
