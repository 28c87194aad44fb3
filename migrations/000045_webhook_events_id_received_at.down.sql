DROP INDEX IF EXISTS webhook_events_id_received_at_key;
