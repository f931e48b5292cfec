-- 007_admin: stopping a code, the audit trail, and the indexes behind the
-- keyset-paginated listings.

-- A disabled voucher refuses new reservations (NOT_ELIGIBLE / DISABLED);
-- its holds may still be confirmed or released and its window is kept.
ALTER TABLE voucher ADD COLUMN disabled boolean NOT NULL DEFAULT false;

-- Voucher listings, every one ordered by code in byte order (COLLATE "C",
-- whatever the database's collation, so that a code prefix is a range).
-- A state is a time range of one of the window's ends; used_count is in no
-- index, so the hot row's update stays HOT.
CREATE INDEX voucher_code_c_idx ON voucher (code COLLATE "C");
CREATE INDEX voucher_flash_code_idx ON voucher (flash_sale, code COLLATE "C");
CREATE INDEX voucher_disabled_code_idx ON voucher (code COLLATE "C") WHERE disabled;
CREATE INDEX voucher_starts_idx ON voucher (starts_at, code COLLATE "C") WHERE NOT disabled;
CREATE INDEX voucher_ends_idx ON voucher (ends_at, code COLLATE "C") WHERE NOT disabled;

-- Redemption listings, each ordered by (created_at, order_id): a voucher's
-- reservations with or without a status, and a customer's redemptions
-- across vouchers. The status index also serves the live counts, so it
-- replaces voucher_redemption_code_status_idx.
CREATE INDEX voucher_redemption_code_created_idx ON voucher_redemption (voucher_code, created_at, order_id);
CREATE INDEX voucher_redemption_code_status_created_idx
    ON voucher_redemption (voucher_code, status, created_at, order_id);
DROP INDEX voucher_redemption_code_status_idx;
CREATE INDEX voucher_redemption_customer_created_idx ON voucher_redemption (customer_id, created_at, order_id);

-- One row per change to a voucher, written in the transaction of the change:
-- who (the API key's name, never its secret), when, and the voucher's fields
-- before and after (NULL before a create).
CREATE TABLE voucher_audit (
    id           bigint      GENERATED ALWAYS AS IDENTITY,
    voucher_code text        NOT NULL,
    action       text        NOT NULL,
    key_name     text        NOT NULL,
    at           timestamptz NOT NULL DEFAULT now(),
    before       jsonb,
    after        jsonb,

    CONSTRAINT voucher_audit_pkey PRIMARY KEY (id),
    CONSTRAINT voucher_audit_action CHECK (action IN ('create', 'patch', 'activate', 'deactivate', 'reconcile'))
);
CREATE INDEX voucher_audit_code_idx ON voucher_audit (voucher_code, id);
