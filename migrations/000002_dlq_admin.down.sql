SET lock_timeout = '5s';

DROP TABLE IF EXISTS reconciliation_runs;
DROP TABLE IF EXISTS replay_jobs;
DROP INDEX IF EXISTS dead_letters_open_id_idx;
DROP INDEX IF EXISTS dead_letters_alert_pending_idx;
ALTER TABLE dead_letters DROP COLUMN IF EXISTS alert_pending;
