-- deliveries_page: a page of a webhook's deliveries after event seq $2,
-- oldest event first, optionally of one status ($3, '' for any).
-- $1 webhook id, $2 after seq, $3 status, $4 limit
SELECT d.webhook_id, d.event_seq, coalesce(e.type, ''), d.voucher_code, d.status, d.attempts, d.created_at,
       d.next_attempt_at, d.last_attempt_at, coalesce(d.last_status, 0), coalesce(d.last_error, ''), d.delivered_at
FROM voucherd_webhook_delivery d
LEFT JOIN voucherd_event e ON e.seq = d.event_seq
WHERE d.webhook_id = $1 AND d.event_seq > $2 AND ($3 = '' OR d.status = $3)
ORDER BY d.event_seq
LIMIT $4
