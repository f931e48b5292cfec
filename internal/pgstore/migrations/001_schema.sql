-- 001_schema: vouchers, redemptions and the per-customer counters.
--
-- Invariants the database enforces on its own, whatever the code above it
-- does (docs/rules.md): used_count never exceeds total_limit and never goes below
-- zero; a customer's held counter never goes below zero; one redemption per
-- order_id.

CREATE TABLE voucher (
    code             text        NOT NULL,
    discount_amount  bigint      NOT NULL,
    min_order_amount bigint      NOT NULL DEFAULT 0,
    total_limit      integer     NOT NULL,
    per_user_limit   integer     NOT NULL DEFAULT 1,
    starts_at        timestamptz NOT NULL,
    ends_at          timestamptz NOT NULL,
    flash_sale       boolean     NOT NULL DEFAULT false,
    used_count       integer     NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT voucher_pkey PRIMARY KEY (code),
    CONSTRAINT voucher_code_format CHECK (code ~ '^[A-Za-z0-9_-]{1,32}$'),
    CONSTRAINT voucher_discount_amount_positive CHECK (discount_amount > 0),
    CONSTRAINT voucher_min_order_amount_nonnegative CHECK (min_order_amount >= 0),
    CONSTRAINT voucher_total_limit_positive CHECK (total_limit > 0),
    CONSTRAINT voucher_per_user_limit_positive CHECK (per_user_limit > 0),
    CONSTRAINT voucher_window CHECK (starts_at < ends_at),
    CONSTRAINT voucher_used_count_nonnegative CHECK (used_count >= 0),
    -- Invariant 1: never oversell.
    CONSTRAINT voucher_used_count_le_total_limit CHECK (used_count <= total_limit)
)
-- The hot row of a flash sale is updated once per use; free space on its page
-- lets PostgreSQL keep each new version on the same page (HOT update, no index
-- writes) since used_count is in no index.
WITH (fillfactor = 50);

CREATE TABLE voucher_redemption (
    order_id        text        NOT NULL,
    voucher_code    text        NOT NULL,
    customer_id     bigint      NOT NULL,
    order_amount    bigint      NOT NULL,
    discount_amount bigint      NOT NULL,
    status          text        NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,

    -- Invariant 3: the orderId is the idempotency key.
    CONSTRAINT voucher_redemption_pkey PRIMARY KEY (order_id),
    -- Vouchers are never deleted. The foreign key takes a KEY SHARE lock on
    -- the voucher row, which does not conflict with the NO KEY UPDATE lock of
    -- the counter update; the one FOR UPDATE of a voucher row is
    -- reconciliation's stamp (reconcile_stamp.sql): NOWAIT, and in a
    -- transaction of its own, so it never waits and holds the lock for that
    -- one statement.
    CONSTRAINT voucher_redemption_voucher_fkey FOREIGN KEY (voucher_code) REFERENCES voucher (code),
    CONSTRAINT voucher_redemption_order_id_format CHECK (order_id ~ '^[A-Za-z0-9._:-]{1,64}$'),
    CONSTRAINT voucher_redemption_customer_id_positive CHECK (customer_id > 0),
    CONSTRAINT voucher_redemption_order_amount_nonnegative CHECK (order_amount >= 0),
    CONSTRAINT voucher_redemption_discount_amount_positive CHECK (discount_amount > 0),
    CONSTRAINT voucher_redemption_status CHECK (status IN ('RESERVED', 'CONFIRMED', 'RELEASED'))
);

-- The expiry sweep reads only due RESERVED rows, oldest first.
CREATE INDEX voucher_redemption_due_idx ON voucher_redemption (expires_at) WHERE status = 'RESERVED';
-- Live counts, gate snapshots and per-voucher listings.
CREATE INDEX voucher_redemption_code_status_idx ON voucher_redemption (voucher_code, status);

-- One counter row per voucher and customer: the per-user limit is enforced by
-- a conditional upsert on this row, for any perUserLimit, and a released use
-- can be taken again. It has no foreign key on purpose: every writer has read
-- the voucher first, vouchers are never deleted, and a second KEY SHARE lock on
-- the hot voucher row per reservation would only add lock traffic.
CREATE TABLE voucher_customer_usage (
    voucher_code text    NOT NULL,
    customer_id  bigint  NOT NULL,
    held         integer NOT NULL,

    CONSTRAINT voucher_customer_usage_pkey PRIMARY KEY (voucher_code, customer_id),
    CONSTRAINT voucher_customer_usage_held_nonnegative CHECK (held >= 0)
);
