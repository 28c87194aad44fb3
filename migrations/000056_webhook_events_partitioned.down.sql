-- Back to one unpartitioned webhook_events (tests prove the migrations
-- reverse; production is forward-only): every partition's rows into the
-- legacy table, which takes the name back.
SET lock_timeout = '5s';

DROP TRIGGER IF EXISTS webhook_events_dedupe ON webhook_events;
DROP FUNCTION IF EXISTS webhook_events_dedupe();
ALTER TABLE webhook_events DETACH PARTITION webhook_events_legacy;
ALTER TABLE webhook_events_legacy DROP CONSTRAINT IF EXISTS webhook_events_received_at_cutover;
INSERT INTO webhook_events_legacy OVERRIDING SYSTEM VALUE
SELECT * FROM webhook_events ON CONFLICT DO NOTHING;
DO $$
DECLARE
    next bigint;
BEGIN
    SELECT coalesce(max(id), 0) + 1 INTO next FROM webhook_events_legacy;
    EXECUTE format('ALTER TABLE webhook_events_legacy ALTER COLUMN id RESTART WITH %s', next);
END
$$;
DROP TABLE webhook_events;
ALTER TABLE webhook_events_legacy RENAME TO webhook_events;
ALTER TABLE webhook_events RENAME CONSTRAINT webhook_events_legacy_pkey TO webhook_events_pkey;
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_legacy_id_received_at_key;
ALTER INDEX webhook_events_legacy_provider_event_id_idx RENAME TO webhook_events_provider_event_id_idx;
GRANT SELECT, INSERT ON webhook_events TO aegis_webhook_api;
