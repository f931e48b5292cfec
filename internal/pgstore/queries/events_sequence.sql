-- events_sequence: gives the next seqs to up to $2 committed events not yet
-- sequenced, in the order they were written, and queues a delivery of each
-- to every active webhook that subscribes to its type, in one statement.
-- The caller holds the row lock of voucherd_event_sequencer and passes its
-- last_seq as $1; the statement returns the last seq given (NULL: none).
-- $1 last seq, $2 limit
WITH p AS (
    SELECT e.id, $1 + row_number() OVER (ORDER BY e.id) AS seq
    FROM (SELECT id FROM voucherd_event WHERE seq IS NULL ORDER BY id LIMIT $2) e
), u AS (
    UPDATE voucherd_event e SET seq = p.seq FROM p WHERE e.id = p.id
    RETURNING e.seq, e.type, e.voucher_code
), d AS (
    INSERT INTO voucherd_webhook_delivery (webhook_id, event_seq, voucher_code)
    SELECT w.id, u.seq, u.voucher_code FROM u JOIN voucherd_webhook w ON w.active AND u.type = ANY (w.events)
)
SELECT max(seq) FROM u
