-- 004_holds: the index that tells HELD_OUT from OUT_OF_STOCK cheaply.
--
-- This version also changed the result columns of voucherd_reserve and
-- voucherd_reserve_batch (dropped and created again; now in functions/).

-- RESERVED holds of a voucher by expiry: the earliest is one index probe
-- (voucherd_earliest_hold), however many holds the voucher has.
CREATE INDEX voucher_redemption_code_expiry_idx ON voucher_redemption (voucher_code, expires_at)
    WHERE status = 'RESERVED';
