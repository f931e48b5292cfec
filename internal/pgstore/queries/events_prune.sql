-- events_prune: deletes the oldest up to $2 sequenced events created before
-- $1, and their deliveries; returns how many events went.
-- $1 cutoff, $2 limit
WITH old AS (
    SELECT id, seq FROM voucherd_event
    WHERE seq IS NOT NULL AND created_at < $1
    ORDER BY seq LIMIT $2
), gone AS (
    DELETE FROM voucherd_event e USING old WHERE e.id = old.id RETURNING e.seq
), d AS (
    DELETE FROM voucherd_webhook_delivery x USING gone WHERE x.event_seq = gone.seq
)
SELECT count(*) FROM gone
