-- webhook_reserved_wanted: turns the writing of reservation.reserved on
-- while the feed asks for it or an active webhook subscribes to it.
UPDATE voucherd_event_settings s
SET reserved_wanted = s.reserved_feed OR EXISTS (
    SELECT 1 FROM voucherd_webhook w WHERE w.active AND 'reservation.reserved' = ANY (w.events))
