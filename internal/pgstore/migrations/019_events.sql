-- 019_events: the outbox of events (docs/events.md), webhooks and their
-- deliveries.
--
-- Events are written by triggers on the rows whose change they report, so
-- every writer (the single and the batch reservation functions, the Kafka
-- consumer's apply, confirm, release, expiry, replacement, administration)
-- writes them in the transaction of the change, and a change that rolls back
-- or never happens (a refusal, a replay) writes none. The triggers are
-- deferred constraint triggers: they run at commit, in the order their
-- changes were made, and read the row as the transaction leaves it, so a
-- batch's placeholder rewritten or deleted before commit, or a replacement
-- put back, reports what was committed.

-- One row: what the triggers read. reserved_wanted is true while some
-- active webhook subscribes to reservation.reserved or reserved_feed is set
-- (the hot path writes reserved events only then); low_stock_share is the
-- service's LowStockShare (negative: no threshold events).
CREATE TABLE voucherd_event_settings (
    id              boolean          NOT NULL DEFAULT true,
    reserved_wanted boolean          NOT NULL DEFAULT false,
    reserved_feed   boolean          NOT NULL DEFAULT false,
    low_stock_share double precision NOT NULL DEFAULT 0.1,

    CONSTRAINT voucherd_event_settings_pkey PRIMARY KEY (id),
    CONSTRAINT voucherd_event_settings_one CHECK (id)
);
INSERT INTO voucherd_event_settings DEFAULT VALUES;

-- The outbox. id is the order of writing; seq, the public id, is given by
-- the sequencer after commit in the order the rows became visible, so a
-- reader paging by seq never skips a row a slower transaction commits
-- later. Every event of one voucher is ordered by seq as its changes were:
-- changes of one reservation are made one transaction after the other, and
-- the events of one transaction have consecutive ids.
CREATE TABLE voucherd_event (
    id           bigint      GENERATED ALWAYS AS IDENTITY,
    seq          bigint,
    type         text        NOT NULL,
    voucher_code text        NOT NULL,
    order_id     text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    data         jsonb       NOT NULL,

    CONSTRAINT voucherd_event_pkey PRIMARY KEY (id)
);
CREATE UNIQUE INDEX voucherd_event_seq_idx ON voucherd_event (seq) WHERE seq IS NOT NULL;
CREATE INDEX voucherd_event_pending_idx ON voucherd_event (id) WHERE seq IS NULL;
CREATE INDEX voucherd_event_code_seq_idx ON voucherd_event (voucher_code, seq) WHERE seq IS NOT NULL;
CREATE INDEX voucherd_event_type_seq_idx ON voucherd_event (type, seq) WHERE seq IS NOT NULL;

-- The last seq given; its row lock makes one sequencer run at a time.
CREATE TABLE voucherd_event_sequencer (
    id       boolean NOT NULL DEFAULT true,
    last_seq bigint  NOT NULL DEFAULT 0,

    CONSTRAINT voucherd_event_sequencer_pkey PRIMARY KEY (id),
    CONSTRAINT voucherd_event_sequencer_one CHECK (id)
);
INSERT INTO voucherd_event_sequencer DEFAULT VALUES;

-- How far a pulling sink (the Kafka topic) has produced; its row lock
-- makes one producer run at a time.
CREATE TABLE voucherd_event_cursor (
    name text   NOT NULL,
    seq  bigint NOT NULL,

    CONSTRAINT voucherd_event_cursor_pkey PRIMARY KEY (name)
);

CREATE TABLE voucherd_webhook (
    id          text        NOT NULL,
    url         text        NOT NULL,
    events      text[]      NOT NULL,
    description text        NOT NULL DEFAULT '',
    secret      text        NOT NULL,
    active      boolean     NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT voucherd_webhook_pkey PRIMARY KEY (id)
);

-- One row per event and subscribed webhook, written by the sequencer.
-- lease_until is set while one instance sends it: others skip it until the
-- lease ends (a crash mid-send makes it due again: at least once).
CREATE TABLE voucherd_webhook_delivery (
    webhook_id      text        NOT NULL,
    event_seq       bigint      NOT NULL,
    voucher_code    text        NOT NULL,
    status          text        NOT NULL DEFAULT 'pending',
    attempts        integer     NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_until     timestamptz,
    last_attempt_at timestamptz,
    last_status     integer,
    last_error      text,
    delivered_at    timestamptz,

    CONSTRAINT voucherd_webhook_delivery_pkey PRIMARY KEY (webhook_id, event_seq),
    CONSTRAINT voucherd_webhook_delivery_webhook_fkey FOREIGN KEY (webhook_id)
        REFERENCES voucherd_webhook (id) ON DELETE CASCADE,
    CONSTRAINT voucherd_webhook_delivery_status CHECK (status IN ('pending', 'delivered', 'failed'))
);
-- The due deliveries, and per webhook and voucher the earliest pending one
-- (deliveries of one voucher go out in order).
CREATE INDEX voucherd_webhook_delivery_due_idx ON voucherd_webhook_delivery (next_attempt_at) WHERE status = 'pending';
CREATE INDEX voucherd_webhook_delivery_order_idx
    ON voucherd_webhook_delivery (webhook_id, voucher_code, event_seq) WHERE status = 'pending';
CREATE INDEX voucherd_webhook_delivery_event_idx ON voucherd_webhook_delivery (event_seq);

-- The data of a reservation event: the row as committed.
CREATE FUNCTION voucherd_event_reservation_data(r voucher_redemption) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'orderId', r.order_id, 'code', coalesce(r.code, r.voucher_code), 'voucherCode', r.voucher_code,
        'customerId', r.customer, 'orderAmount', r.order_amount, 'discountAmount', r.discount_amount,
        'status', r.status, 'createdAt', r.created_at, 'updatedAt', r.updated_at, 'expiresAt', r.expires_at)
$$;

-- voucherd_event_redemption writes reservation.reserved (inserted RESERVED,
-- while wanted), reservation.confirmed and reservation.released (with its
-- reason) for a change of a redemption, when the row is still as the change
-- left it at commit.
CREATE FUNCTION voucherd_event_redemption() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r voucher_redemption%ROWTYPE;
    v_type text;
    v_data jsonb;
    v_by text;
BEGIN
    SELECT x.* INTO r FROM voucher_redemption x WHERE x.order_id = NEW.order_id;
    IF NOT FOUND OR r.status <> NEW.status OR (TG_OP = 'UPDATE' AND r.updated_at <> NEW.updated_at) THEN
        -- Deleted (a batch's refused placeholder), put back (a replacement
        -- that could not be inserted) or changed again later in the
        -- transaction (that change reports itself). A batch rewrites a
        -- placeholder it keeps (a RESERVED row, other timestamps): the
        -- event reports the row as rewritten.
        RETURN NULL;
    END IF;
    v_data := voucherd_event_reservation_data(r);
    IF TG_OP = 'INSERT' THEN
        v_type := 'reservation.reserved';
    ELSIF r.status = 'CONFIRMED' AND OLD.status = 'RESERVED' THEN
        v_type := 'reservation.confirmed';
    ELSIF r.status = 'RELEASED' AND OLD.status IN ('RESERVED', 'CONFIRMED') THEN
        v_type := 'reservation.released';
        IF OLD.status = 'CONFIRMED' THEN
            v_data := v_data || '{"reason": "refunded"}';
        ELSIF r.updated_at >= OLD.expires_at THEN
            v_data := v_data || '{"reason": "expired"}';
        ELSE
            -- A replacement releases the customer's hold and inserts the new
            -- one with the same timestamp, in the same transaction.
            SELECT x.order_id INTO v_by FROM voucher_redemption x
            WHERE x.voucher_code = r.voucher_code AND x.customer = r.customer AND x.created_at = r.updated_at
              AND x.order_id <> r.order_id AND x.status <> 'RELEASED'
            LIMIT 1;
            IF v_by IS NOT NULL THEN
                v_data := v_data || jsonb_build_object('reason', 'replaced', 'replacedBy', v_by);
            ELSE
                v_data := v_data || '{"reason": "released"}';
            END IF;
        END IF;
    ELSE
        RETURN NULL;
    END IF;
    INSERT INTO voucherd_event (type, voucher_code, order_id, data) VALUES (v_type, r.voucher_code, r.order_id, v_data);
    RETURN NULL;
END
$$;

-- Whether reservation.reserved is written, and the free uses below which a
-- take may cross a threshold (the low-stock threshold, at least 1 for
-- sold out; 0: no threshold events). The triggers' WHEN conditions call
-- them: a constraint trigger's WHEN is evaluated when the row changes, so a
-- reservation that reports nothing queues nothing for the commit, which
-- runs while the voucher row is locked.
CREATE FUNCTION voucherd_event_reserved_wanted() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT s.reserved_wanted FROM voucherd_event_settings s
$$;

CREATE FUNCTION voucherd_event_threshold(p_total_limit integer) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN s.low_stock_share < 0 THEN 0
                ELSE greatest(ceil(s.low_stock_share * p_total_limit - 1e-9)::bigint, 1) END
    FROM voucherd_event_settings s
$$;

CREATE CONSTRAINT TRIGGER voucherd_event_redemption_insert
    AFTER INSERT ON voucher_redemption DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.status = 'RESERVED' AND voucherd_event_reserved_wanted())
    EXECUTE FUNCTION voucherd_event_redemption();
CREATE CONSTRAINT TRIGGER voucherd_event_redemption_update
    AFTER UPDATE OF status ON voucher_redemption DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION voucherd_event_redemption();

-- voucherd_event_voucher writes voucher.disabled and voucher.enabled, and the
-- threshold events of a take (voucher.low_stock, voucher.sold_out): the
-- free uses were at or above the threshold before the update that raised
-- used_count and are below it after (docs/events.md). A change of
-- total_limit crosses nothing by itself.
CREATE FUNCTION voucherd_event_voucher() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_share double precision;
    v_before bigint;
    v_after bigint;
    v_threshold bigint;
BEGIN
    IF NEW.disabled IS DISTINCT FROM OLD.disabled THEN
        INSERT INTO voucherd_event (type, voucher_code, data)
        VALUES (CASE WHEN NEW.disabled THEN 'voucher.disabled' ELSE 'voucher.enabled' END, NEW.code,
                jsonb_build_object('code', NEW.code, 'campaign', NEW.campaign));
    END IF;
    IF NEW.used_count <= OLD.used_count OR NEW.total_limit <> OLD.total_limit THEN
        RETURN NULL;
    END IF;
    SELECT s.low_stock_share INTO v_share FROM voucherd_event_settings s;
    IF v_share < 0 THEN
        RETURN NULL;
    END IF;
    v_before := OLD.total_limit - OLD.used_count;
    v_after := NEW.total_limit - NEW.used_count;
    -- As voucher.LowStockThreshold: free < ceil(share × totalLimit).
    v_threshold := CASE WHEN v_share > 0 THEN ceil(v_share * NEW.total_limit - 1e-9)::bigint ELSE 0 END;
    IF v_threshold > 0 AND v_before >= v_threshold AND v_after < v_threshold THEN
        INSERT INTO voucherd_event (type, voucher_code, data)
        VALUES ('voucher.low_stock', NEW.code, jsonb_build_object('code', NEW.code, 'totalLimit', NEW.total_limit,
                'remaining', v_after, 'threshold', v_threshold));
    END IF;
    IF v_before > 0 AND v_after <= 0 THEN
        INSERT INTO voucherd_event (type, voucher_code, data)
        VALUES ('voucher.sold_out', NEW.code, jsonb_build_object('code', NEW.code, 'totalLimit', NEW.total_limit,
                'remaining', v_after));
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER voucherd_event_voucher
    AFTER UPDATE OF used_count, disabled ON voucher DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.disabled IS DISTINCT FROM OLD.disabled
        OR (NEW.used_count > OLD.used_count AND NEW.total_limit = OLD.total_limit
            AND NEW.total_limit - NEW.used_count < voucherd_event_threshold(NEW.total_limit)
            AND OLD.total_limit - OLD.used_count > 0))
    EXECUTE FUNCTION voucherd_event_voucher();
