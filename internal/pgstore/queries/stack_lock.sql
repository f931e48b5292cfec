-- stack_lock: serialise the stacks that share a code, in code order, for
-- the transaction (docs/stacks.md, "Locks"). Rows are locked in the order
-- of the array, which the caller sorts.
-- $1 codes, sorted
SELECT count(pg_advisory_xact_lock(hashtextextended('voucherd.stack:' || c, 0))) FROM unnest($1::text[]) AS c
