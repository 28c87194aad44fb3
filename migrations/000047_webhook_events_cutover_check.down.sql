ALTER TABLE IF EXISTS webhook_events DROP CONSTRAINT IF EXISTS webhook_events_received_at_cutover;
