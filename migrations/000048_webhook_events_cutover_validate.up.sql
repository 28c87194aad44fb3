-- Step 2 of partitioning webhook_events, continued: VALIDATE CONSTRAINT
-- scans the table under SHARE UPDATE EXCLUSIVE, so inserts and reads go on
-- while it runs (PostgreSQL's ALTER TABLE, "VALIDATE CONSTRAINT"). Then the
-- keys of the dedupe horizon (and a day) inserted before 000047's trigger
-- are recorded in webhook_event_keys, in the same way: a read of the table
-- and inserts into the keys, blocking no insert (a key the trigger records
-- meanwhile is left as it is).
SET lock_timeout = '5s';

ALTER TABLE webhook_events VALIDATE CONSTRAINT webhook_events_received_at_cutover;

INSERT INTO webhook_event_keys (provider, event_id, received_at)
SELECT e.provider, e.event_id, e.received_at FROM webhook_events e
WHERE e.received_at >= now() - (SELECT p.dedupe_horizon FROM partition_policies p WHERE p.table_name = 'webhook_events') - interval '1 day'
ON CONFLICT (provider, event_id) DO NOTHING;
