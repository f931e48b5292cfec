-- deliveries_record: the outcome of one attempt; the lease ends. Only the
-- latest attempt's outcome counts: $7, the attempt number the claim gave,
-- fences off an instance whose lease ran out and whose delivery was claimed
-- again meanwhile. A retry also moves the next attempt of the later pending
-- deliveries of its webhook and voucher to its own: they wait for it
-- anyway, and the claim then does not read them again each round while a
-- receiver is down.
-- $1 webhook id, $2 event seq, $3 status, $4 next attempt, $5 HTTP status
-- (NULL: no answer), $6 error ('' for none), $7 attempt
WITH r AS (
    UPDATE voucherd_webhook_delivery
    SET status = $3, next_attempt_at = $4, lease_until = NULL, last_status = $5, last_error = nullif($6, ''),
        delivered_at = CASE WHEN $3 = 'delivered' THEN now() END
    WHERE webhook_id = $1 AND event_seq = $2 AND attempts = $7
    RETURNING voucher_code, status, next_attempt_at
)
UPDATE voucherd_webhook_delivery d SET next_attempt_at = r.next_attempt_at
FROM r
WHERE r.status = 'pending' AND d.webhook_id = $1 AND d.voucher_code = r.voucher_code
  AND d.status = 'pending' AND d.event_seq > $2 AND d.next_attempt_at < r.next_attempt_at
