-- 009_campaigns: campaigns of unique single-use codes sharing one budget.
--
-- A campaign's budget is a voucher row flagged campaign (its code is the
-- campaign id): its used_count is the campaign's stock, its customer
-- counters the per-customer limit across all its codes, and every rule and
-- lock of a voucher applies to it unchanged. It is never reserved by its own
-- code, only through one of its codes (campaign_code). A redemption made
-- with a campaign code keeps voucher_code = the campaign id and records the
-- code presented in code; a code is held by at most one RESERVED or
-- CONFIRMED redemption (voucher_redemption_code_live_idx), and comes free
-- again when that redemption is released.
-- Campaign codes reserve through PostgreSQL, so a budget is no flash sale.
ALTER TABLE voucher ADD COLUMN campaign boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT voucher_campaign_not_flash CHECK (NOT (campaign AND flash_sale));

CREATE TABLE campaign (
    id          text        NOT NULL,
    name        text        NOT NULL,
    code_prefix text        NOT NULL,
    code_length integer     NOT NULL,
    code_count  integer     NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT campaign_pkey PRIMARY KEY (id),
    CONSTRAINT campaign_voucher_fkey FOREIGN KEY (id) REFERENCES voucher (code),
    CONSTRAINT campaign_name_length CHECK (char_length(name) BETWEEN 1 AND 200),
    CONSTRAINT campaign_code_count_nonnegative CHECK (code_count >= 0)
);

CREATE TABLE campaign_code (
    code        text NOT NULL,
    campaign_id text NOT NULL,

    CONSTRAINT campaign_code_pkey PRIMARY KEY (code),
    CONSTRAINT campaign_code_campaign_fkey FOREIGN KEY (campaign_id) REFERENCES campaign (id),
    CONSTRAINT campaign_code_format CHECK (code ~ '^[A-Za-z0-9_-]{1,32}$')
);
-- A campaign's codes in byte order: the keyset pages and the CSV export.
CREATE INDEX campaign_code_campaign_idx ON campaign_code (campaign_id, code COLLATE "C");

-- The campaign code a redemption was made with (NULL for a voucher's).
ALTER TABLE voucher_redemption ADD COLUMN code text;
-- Each campaign code is held by at most one live redemption.
CREATE UNIQUE INDEX voucher_redemption_code_live_idx ON voucher_redemption (code)
    WHERE code IS NOT NULL AND status <> 'RELEASED';

-- Vouchers and campaign codes share one namespace: a code names one thing.
-- Both inserts take this transaction lock, so neither can slip past the
-- other's check.
CREATE FUNCTION voucherd_code_namespace_lock() RETURNS void LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(7011011)
$$;

CREATE FUNCTION voucherd_voucher_code_free() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM voucherd_code_namespace_lock();
    IF EXISTS (SELECT 1 FROM campaign_code c WHERE c.code = NEW.code) THEN
        RAISE EXCEPTION USING ERRCODE = '23505', CONSTRAINT = 'voucher_pkey',
            MESSAGE = format('code %s is a campaign code', NEW.code);
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER voucher_code_free BEFORE INSERT ON voucher
    FOR EACH ROW EXECUTE FUNCTION voucherd_voucher_code_free();
