-- Step 2 of partitioning webhook_events, continued: VALIDATE CONSTRAINT
-- scans the table under SHARE UPDATE EXCLUSIVE, so inserts and reads go on
-- while it runs (PostgreSQL's ALTER TABLE, "VALIDATE CONSTRAINT").
SET lock_timeout = '5s';

ALTER TABLE webhook_events VALIDATE CONSTRAINT webhook_events_received_at_cutover;
