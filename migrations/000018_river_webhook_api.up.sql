-- The PSP reconciliation runs on River (docs/design/architecture.md, "Background
-- jobs"): dlq-admin queues a requested run, webhook-api's River client
-- works it and schedules runs (its elected leader inserts the periodic
-- job). webhook-api's role gets what 000017 gave dlq-admin's: full DML on
-- River's job, leader and queue tables, and the job id sequence.
-- river_migration stays the migrator's; river_notification is River's
-- SQLite outbox, unused on Postgres. psp_reconciliation_runs stays as the
-- operator's record of a run; its lease_until column is no longer written
-- (River's job is the lease) and is kept for a rolling deploy.
SET lock_timeout = '5s';

GRANT SELECT, INSERT, UPDATE, DELETE ON river_job, river_leader, river_queue TO aegis_webhook_api;
GRANT USAGE ON SEQUENCE river_job_id_seq TO aegis_webhook_api;
