-- 024_reserved_event_condition_per_call: a write function may read the
-- reserved event's setting once for the rows it inserts.
--
-- The WHEN of voucherd_event_redemption_insert called
-- voucherd_event_reserved_wanted() for every redemption inserted: a
-- PL/pgSQL call and a read of voucherd_event_settings per row, the same
-- answer 25 times in a batch. A write function that inserts many rows now
-- reads the setting once and puts it in the transaction-local setting
-- voucherd.reserved_wanted ('true' or 'false') for its own statements,
-- then sets it back to '' (docs/storage.md). The WHEN takes that value when
-- it is set, and reads the table as before when it is not (NULL before the
-- session first set it, '' after), so every other writer is unchanged.
-- A constraint trigger's WHEN is evaluated when the row is inserted, not
-- when the trigger runs at commit.
DROP TRIGGER voucherd_event_redemption_insert ON voucher_redemption;
CREATE CONSTRAINT TRIGGER voucherd_event_redemption_insert
    AFTER INSERT ON voucher_redemption DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.status = 'RESERVED'
        AND coalesce(nullif(current_setting('voucherd.reserved_wanted', true), '')::boolean,
                     voucherd_event_reserved_wanted()))
    EXECUTE FUNCTION voucherd_event_redemption();
