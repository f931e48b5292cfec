-- 017_voucher_currency_customer: a voucher may name its currency (ISO 4217)
-- and the one customer it serves; both are set at creation only. The
-- eligibility rule gains both (voucherd_eligibility), so the functions that
-- apply it take the request's currency: their old signatures are dropped
-- here and the new ones, whose p_currency defaults to NULL (no currency),
-- are created from functions/ in the same transaction. A previous release
-- calls them with its old arguments and gets the default: it serves every
-- voucher without a currency as before, and refuses one with a currency
-- (CURRENCY_MISMATCH), never the other way.
ALTER TABLE voucher ADD COLUMN currency text;
ALTER TABLE voucher ADD CONSTRAINT voucher_currency_format CHECK (currency ~ '^[A-Z]{3}$');
ALTER TABLE voucher ADD COLUMN bound_customer text;
ALTER TABLE voucher ADD CONSTRAINT voucher_bound_customer_format CHECK (bound_customer ~ '^[A-Za-z0-9._:@+-]{1,64}$');

DROP FUNCTION IF EXISTS voucherd_eligibility(voucher, bigint, timestamptz);
DROP FUNCTION IF EXISTS voucherd_eligibility_facts(voucher, bigint);
DROP FUNCTION IF EXISTS voucherd_reserve_one(text, text, text, bigint, timestamptz, interval);
DROP FUNCTION IF EXISTS voucherd_reserve_batch(text, text[], text[], bigint[], timestamptz[], interval);
DROP FUNCTION IF EXISTS voucherd_validate(text, text, text, bigint, timestamptz);
DROP FUNCTION IF EXISTS voucherd_replace(text, text, text, text, bigint, timestamptz, interval);
