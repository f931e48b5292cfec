-- 025_window_limits: recurring windows with a quota per occurrence
-- (docs/rules.md, "Recurring windows").
--
-- voucher.schedule is the voucher's windows as the service validated them
-- (voucher.Schedule: a time zone and wall-clock windows); the service, not
-- PostgreSQL, decides which occurrence an instant falls in (Go's time
-- package with the IANA database) and passes its start to the reservation
-- functions (p_window). A windowed voucher asked with no occurrence is
-- refused OUTSIDE_WINDOW. voucher.window_limit is the uses one occurrence's
-- held redemptions may hold together: a voucher_limit row of kind 'window'
-- per occurrence, keyed by its start (period_start), created by the first
-- reservation of the occurrence (voucherd_limit_fit) with that cap.
-- voucher_redemption.window_start names the occurrence a redemption was
-- taken in, so that the trigger voucherd_limit_count gives its use back to
-- that occurrence whenever it is released.
ALTER TABLE voucher
    ADD COLUMN schedule jsonb,
    ADD COLUMN window_limit integer,
    ADD CONSTRAINT voucher_window_limit_positive CHECK (window_limit > 0),
    ADD CONSTRAINT voucher_window_limit_scheduled CHECK (window_limit IS NULL OR schedule IS NOT NULL);

ALTER TABLE voucher_redemption ADD COLUMN window_start timestamptz;

ALTER TABLE voucher_limit DROP CONSTRAINT voucher_limit_kind;
ALTER TABLE voucher_limit ADD CONSTRAINT voucher_limit_kind CHECK (kind IN ('budget', 'window'));

-- The functions that take the occurrence gain an argument.
DROP FUNCTION IF EXISTS voucherd_limit_fit(text, bigint, timestamptz, text, boolean);
DROP FUNCTION IF EXISTS voucherd_reserve_one(text, text, text, bigint, timestamptz, interval, text);
DROP FUNCTION IF EXISTS voucherd_validate(text, text, text, bigint, timestamptz, text);
DROP FUNCTION IF EXISTS voucherd_replace(text, text, text, text, bigint, timestamptz, interval, text);
DROP FUNCTION IF EXISTS voucherd_apply_reserved_codes(text[], text[], text[], bigint[], bigint[], timestamptz[], timestamptz[], text[]);
DROP FUNCTION IF EXISTS voucherd_apply_replace_code(text, text, text, bigint, bigint, timestamptz, timestamptz, text, text);
