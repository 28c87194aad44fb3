DROP FUNCTION IF EXISTS webhook_events_all_inserted(bigint, bigint);
DROP FUNCTION IF EXISTS partition_status();
DROP FUNCTION IF EXISTS maintain_partitions(text);
DROP FUNCTION IF EXISTS partition_bounds(regclass);
DROP TABLE IF EXISTS webhook_event_keys;
DROP TABLE IF EXISTS partition_policies;
