-- deliveries_claim: claims up to $1 due deliveries for $2 (a lease), at
-- most one per webhook and voucher: the earliest pending one, so that one
-- voucher's events reach a receiver in order. SKIP LOCKED and the lease keep
-- two instances from claiming the same row; an ended lease (a crash mid-send)
-- makes a delivery due again.
-- $1 limit, $2 lease
WITH c AS (
    SELECT d.webhook_id, d.event_seq FROM voucherd_webhook_delivery d
    JOIN voucherd_webhook w ON w.id = d.webhook_id AND w.active
    WHERE d.status = 'pending' AND d.next_attempt_at <= now()
      AND (d.lease_until IS NULL OR d.lease_until <= now())
      AND NOT EXISTS (
          SELECT 1 FROM voucherd_webhook_delivery p
          WHERE p.webhook_id = d.webhook_id AND p.voucher_code = d.voucher_code
            AND p.status = 'pending' AND p.event_seq < d.event_seq)
    ORDER BY d.next_attempt_at, d.event_seq
    LIMIT $1
    FOR UPDATE OF d SKIP LOCKED
)
UPDATE voucherd_webhook_delivery d
SET lease_until = now() + $2::interval, attempts = d.attempts + 1, last_attempt_at = now()
FROM c, voucherd_webhook w, voucherd_event e
WHERE d.webhook_id = c.webhook_id AND d.event_seq = c.event_seq AND w.id = d.webhook_id AND e.seq = d.event_seq
RETURNING d.webhook_id, w.url, w.secret, d.attempts, d.created_at, e.seq, e.type, e.voucher_code, e.created_at, e.data
