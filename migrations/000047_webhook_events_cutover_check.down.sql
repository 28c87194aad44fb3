DROP TRIGGER IF EXISTS webhook_event_keys_track ON webhook_events;
DROP FUNCTION IF EXISTS webhook_event_keys_track();
ALTER TABLE IF EXISTS webhook_events DROP CONSTRAINT IF EXISTS webhook_events_received_at_cutover;
