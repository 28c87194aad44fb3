SET lock_timeout = '5s';

DROP TABLE IF EXISTS replay_job_letters;
DROP INDEX IF EXISTS dead_letters_replay_of_idx;
DROP INDEX IF EXISTS dead_letters_event_type_idx;
DROP INDEX IF EXISTS dead_letters_correlation_idx;
DROP INDEX IF EXISTS dead_letters_partition_key_idx;
DROP INDEX IF EXISTS dead_letters_payout_idx;
ALTER TABLE replay_jobs DROP CONSTRAINT replay_jobs_attempted_within_max;
ALTER TABLE replay_jobs ADD CONSTRAINT replay_jobs_attempted_within_max CHECK (replayed + failed <= max);
ALTER TABLE replay_jobs DROP COLUMN noop;
ALTER TABLE dead_letters DROP COLUMN replay_subject_state, DROP COLUMN replay_outcome, DROP COLUMN subject;
DROP FUNCTION dead_letter_subject(bytea);
