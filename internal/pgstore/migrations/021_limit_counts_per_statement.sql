-- 021_limit_counts_per_statement: the limit counters follow inserted and
-- deleted redemptions once per statement instead of once per row.
--
-- The row trigger voucher_redemption_limits ran a PL/pgSQL call and an
-- UPDATE of voucher_limit for every redemption inserted or deleted, whether
-- its voucher had a limit or not: about a fifth of PostgreSQL's CPU for the
-- rows of a take (docs/storage.md). These statement triggers read the
-- statement's rows from a transition table and move each limit counter
-- once; a statement whose vouchers have no limit costs one probe per
-- voucher. Updates keep their row trigger (voucher_redemption_limits_update,
-- migration 020): with a column list and a WHEN it fires only for the few
-- updates that change a weight, which a statement trigger (no column list,
-- no WHEN with transition tables) could not tell from a confirmation.
DROP TRIGGER voucher_redemption_limits ON voucher_redemption;

-- The function is functions/voucherd_limit_count_rows.sql, applied right
-- after the migrations in the same transaction; this placeholder only lets
-- the triggers be created first.
CREATE FUNCTION voucherd_limit_count_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'voucherd_limit_count_rows is not installed';
END
$$;

CREATE TRIGGER voucher_redemption_limits_insert
    AFTER INSERT ON voucher_redemption REFERENCING NEW TABLE AS voucherd_limit_rows
    FOR EACH STATEMENT EXECUTE FUNCTION voucherd_limit_count_rows();
CREATE TRIGGER voucher_redemption_limits_delete
    AFTER DELETE ON voucher_redemption REFERENCING OLD TABLE AS voucherd_limit_rows
    FOR EACH STATEMENT EXECUTE FUNCTION voucherd_limit_count_rows();
