-- 020_limit_counters: limits counted in something other than uses, one
-- counter row per limit (docs/core.md, "Adding a limit").
--
-- A row of voucher_limit is one limit of one voucher (or campaign budget):
-- its kind says what a held redemption weighs against it (voucherd_limit_weight:
-- 'budget' weighs the redemption's stored discount_amount), period_start
-- which redemptions it counts ('-infinity': every one; a per-window quota
-- would be a row per occurrence), cap the most the held (RESERVED and
-- CONFIRMED) redemptions may weigh together, held what they weigh now.
-- voucher_limit_held_le_cap is the last line of defence, as
-- voucher_used_count_le_total_limit is for uses: whatever writes a
-- redemption, the trigger voucher_redemption_limits counts it here in the
-- same statement, and a write that would exceed a cap fails whole. clip:
-- a reservation whose weight does not fit is given what is left instead of
-- being refused (money budgets only).
CREATE TABLE voucher_limit (
    voucher_code text        NOT NULL,
    kind         text        NOT NULL,
    period_start timestamptz NOT NULL DEFAULT '-infinity',
    cap          bigint      NOT NULL,
    held         bigint      NOT NULL DEFAULT 0,
    clip         boolean     NOT NULL DEFAULT false,

    CONSTRAINT voucher_limit_pkey PRIMARY KEY (voucher_code, kind, period_start),
    CONSTRAINT voucher_limit_voucher_fkey FOREIGN KEY (voucher_code) REFERENCES voucher (code),
    CONSTRAINT voucher_limit_kind CHECK (kind IN ('budget')),
    CONSTRAINT voucher_limit_cap_positive CHECK (cap > 0),
    CONSTRAINT voucher_limit_held_nonnegative CHECK (held >= 0),
    CONSTRAINT voucher_limit_held_le_cap CHECK (held <= cap)
)
-- Updated once per use of a limited voucher, like the voucher row.
WITH (fillfactor = 50);

-- The trigger's function is functions/voucherd_limit_count.sql, applied
-- right after the migrations in the same transaction; this placeholder only
-- lets the trigger be created first.
CREATE FUNCTION voucherd_limit_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'voucherd_limit_count is not installed';
END
$$;

-- A weight depends only on whether the redemption holds a use and on its
-- discount (voucherd_limit_weight), so an update that changes neither (a
-- confirmation, an extension) does not call the trigger at all.
CREATE TRIGGER voucher_redemption_limits
    AFTER INSERT OR DELETE ON voucher_redemption
    FOR EACH ROW EXECUTE FUNCTION voucherd_limit_count();
CREATE TRIGGER voucher_redemption_limits_update
    AFTER UPDATE OF status, discount_amount ON voucher_redemption
    FOR EACH ROW
    WHEN ((OLD.status = 'RELEASED') IS DISTINCT FROM (NEW.status = 'RELEASED')
          OR OLD.discount_amount IS DISTINCT FROM NEW.discount_amount)
    EXECUTE FUNCTION voucherd_limit_count();
