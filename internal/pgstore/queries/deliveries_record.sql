-- deliveries_record: the outcome of one attempt; the lease ends. Only the
-- latest attempt's outcome counts: $7, the attempt number the claim gave,
-- fences off an instance whose lease ran out and whose delivery was claimed
-- again meanwhile.
-- $1 webhook id, $2 event seq, $3 status, $4 next attempt, $5 HTTP status
-- (NULL: no answer), $6 error ('' for none), $7 attempt
UPDATE voucherd_webhook_delivery
SET status = $3, next_attempt_at = $4, lease_until = NULL, last_status = $5, last_error = nullif($6, ''),
    delivered_at = CASE WHEN $3 = 'delivered' THEN now() END
WHERE webhook_id = $1 AND event_seq = $2 AND attempts = $7
