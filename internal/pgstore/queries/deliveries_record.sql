-- deliveries_record: the outcome of one attempt; the lease ends.
-- $1 webhook id, $2 event seq, $3 status, $4 next attempt, $5 HTTP status
-- (NULL: no answer), $6 error ('' for none)
UPDATE voucherd_webhook_delivery
SET status = $3, next_attempt_at = $4, lease_until = NULL, last_status = $5, last_error = nullif($6, ''),
    delivered_at = CASE WHEN $3 = 'delivered' THEN now() END
WHERE webhook_id = $1 AND event_seq = $2
