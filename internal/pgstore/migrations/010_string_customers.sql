-- 010_string_customers: customerIds become strings (1-64 characters of
-- letters, digits and . _ : - @ +), and a voucher may normalise them.
--
-- Expand phase of an expand/contract change, so that an instance of the
-- previous release and one of this release serve the database at once:
--   - voucher_redemption.customer and voucher_customer_usage.customer (text)
--     are the customer from now on; the usage counter's key is
--     (voucher_code, customer).
--   - customer_id (bigint) stays, as the previous release's statements read
--     and write it: it mirrors customer (voucherd_customer_legacy), the
--     integer itself for an integer id, a negative stand-in otherwise. This
--     release's functions write both columns; a row the previous release
--     inserts itself (abandon_order) gets its customer from
--     voucher_redemption_customer_from_legacy.
--   - The functions the previous release calls with bigint customer ids keep
--     their signatures as wrappers of this release's functions (below), so
--     both releases count every customer on the same counter row.
-- A later release drops customer_id, the trigger and the wrappers (contract).
-- Existing rows keep their counts: customer is customer_id's decimal form.

ALTER TABLE voucher ADD COLUMN customer_id_normalization text NOT NULL DEFAULT 'none';
ALTER TABLE voucher ADD CONSTRAINT voucher_customer_id_normalization CHECK (customer_id_normalization IN ('none', 'email'));

ALTER TABLE voucher_redemption ADD COLUMN customer text;
UPDATE voucher_redemption SET customer = customer_id::text;
ALTER TABLE voucher_redemption ALTER COLUMN customer SET NOT NULL;
ALTER TABLE voucher_redemption DROP CONSTRAINT voucher_redemption_customer_id_positive;
ALTER TABLE voucher_redemption ADD CONSTRAINT voucher_redemption_customer_format
    CHECK (customer ~ '^[A-Za-z0-9._:@+-]{1,64}$');
DROP INDEX voucher_redemption_customer_created_idx;
CREATE INDEX voucher_redemption_customer_created_idx ON voucher_redemption (customer, created_at, order_id);

ALTER TABLE voucher_customer_usage ADD COLUMN customer text;
UPDATE voucher_customer_usage SET customer = customer_id::text;
ALTER TABLE voucher_customer_usage ALTER COLUMN customer SET NOT NULL;
ALTER TABLE voucher_customer_usage DROP CONSTRAINT voucher_customer_usage_pkey;
ALTER TABLE voucher_customer_usage ADD CONSTRAINT voucher_customer_usage_pkey PRIMARY KEY (voucher_code, customer);

-- A redemption the previous release inserts with customer_id only (its
-- abandon_order statement): customer is that integer's decimal form. The
-- WHEN clause keeps this release's inserts, which set customer, free of
-- the trigger's call.
CREATE FUNCTION voucher_redemption_customer_from_legacy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.customer := NEW.customer_id::text;
    RETURN NEW;
END
$$;
CREATE TRIGGER voucher_redemption_customer_from_legacy BEFORE INSERT ON voucher_redemption
    FOR EACH ROW WHEN (NEW.customer IS NULL) EXECUTE FUNCTION voucher_redemption_customer_from_legacy();

-- Functions whose customer argument became text; their bigint versions go.
DROP FUNCTION IF EXISTS voucherd_give_back(text, bigint);
DROP FUNCTION IF EXISTS voucherd_order_verdict(voucher_redemption, text, bigint);
DROP FUNCTION IF EXISTS voucherd_quota_facts(text, bigint, integer);

-- The previous release's entry points, with their signatures and result
-- columns, as wrappers of this release's functions (created after the
-- migrations, hence plpgsql, whose calls are resolved when they run).
-- voucherd_reserve is this release's voucherd_reserve_one: a text overload
-- of the same name would capture the previous release's untyped calls.
CREATE OR REPLACE FUNCTION voucherd_reserve(
    p_code text, p_customer bigint, p_order text, p_amount bigint, p_now timestamptz, p_ttl interval,
    OUT redemption voucher_redemption, OUT replay boolean, OUT o_used integer, OUT o_total integer)
LANGUAGE plpgsql AS $$
DECLARE
    x record;
BEGIN
    SELECT * INTO x FROM voucherd_reserve_one(p_code, p_customer::text, p_order, p_amount, p_now, p_ttl);
    redemption := x.redemption;
    replay := x.replay;
    o_used := x.o_used;
    o_total := x.o_total;
END
$$;

CREATE OR REPLACE FUNCTION voucherd_reserve_batch(
    p_code text, p_customers bigint[], p_orders text[], p_amounts bigint[], p_nows timestamptz[], p_ttl interval)
RETURNS TABLE (
    o_order_id text, o_voucher_code text, o_customer_id bigint, o_order_amount bigint, o_discount_amount bigint,
    o_status text, o_created_at timestamptz, o_updated_at timestamptz, o_expires_at timestamptz, o_replay boolean,
    o_error text, o_reason text, o_message text, o_n integer, o_retry_ms bigint, o_used integer, o_total integer)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
        SELECT x.o_order_id, x.o_voucher_code, voucherd_customer_legacy(x.o_customer), x.o_order_amount,
               x.o_discount_amount, x.o_status, x.o_created_at, x.o_updated_at, x.o_expires_at, x.o_replay,
               x.o_error, x.o_reason, x.o_message, x.o_n, x.o_retry_ms, x.o_used, x.o_total
        FROM voucherd_reserve_batch(p_code, p_customers::text[], p_orders, p_amounts, p_nows, p_ttl) AS x;
END
$$;

CREATE OR REPLACE FUNCTION voucherd_apply_reserved(
    p_order_ids text[], p_codes text[], p_customers bigint[], p_amounts bigint[],
    p_discounts bigint[], p_reserved_at timestamptz[], p_expires_at timestamptz[])
RETURNS TABLE (o_order_id text, o_inserted boolean, o_voucher_code text, o_customer_id bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
        SELECT x.o_order_id, x.o_inserted, x.o_voucher_code, voucherd_customer_legacy(x.o_customer)
        FROM voucherd_apply_reserved(p_order_ids, p_codes, p_customers::text[], p_amounts, p_discounts,
                                     p_reserved_at, p_expires_at) AS x;
END
$$;
