-- The payout worker's sweeper parks payouts it cannot settle (a PSP record
-- that contradicts the payout, a state past its deadline) with a dead
-- letter of the payout's command. No record failed, so it has no consumer
-- group or offset: it is a source of its own.
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_source_check,
    ADD CONSTRAINT dead_letters_source_check CHECK (source IN ('ingest', 'relay', 'consumer', 'sweeper'));
