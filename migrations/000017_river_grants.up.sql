-- River's tables (created by River's own migrator, which Up runs before
-- these files: river.go) are dlq-admin's background job queue
-- (docs/design/architecture.md, "Background jobs"). dlq-admin inserts jobs, its
-- River client fetches, completes, retries and cleans them, elects a leader
-- and keeps its queues' rows: full DML on the job, leader and queue tables,
-- and the job id sequence. river_migration stays the migrator's;
-- river_notification is River's SQLite outbox, unused on Postgres.
SET lock_timeout = '5s';

GRANT SELECT, INSERT, UPDATE, DELETE ON river_job, river_leader, river_queue TO aegis_dlq_admin;
GRANT USAGE ON SEQUENCE river_job_id_seq TO aegis_dlq_admin;
