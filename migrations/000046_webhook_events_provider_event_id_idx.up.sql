-- Step 1 of partitioning webhook_events, continued: the partitioned
-- table's lookup index for the dedupe check, (provider, event_id), not
-- unique (a unique index of a partitioned table must hold the partition
-- key). The old table's unique constraint cannot stand in for it (a unique
-- index does not match a plain one), so it is built here, CONCURRENTLY,
-- alone in its file.
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_events_provider_event_id_idx ON webhook_events (provider, event_id);
