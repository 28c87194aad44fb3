-- Step 1 of partitioning webhook_events by received_at
-- (docs/operations/partition-webhook-events.md): the partitioned table's
-- primary key must hold its partition key, so the table that becomes its
-- first partition needs a unique index on (id, received_at) to attach
-- without a build under lock. CONCURRENTLY: ingest keeps writing (SHARE
-- UPDATE EXCLUSIVE); it cannot run in a transaction, so this file holds
-- this one statement.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS webhook_events_id_received_at_key ON webhook_events (id, received_at);
