-- dlq-admin, the API of the ops console: what a replay did, and
-- the subject of every letter (payout, event, user, amount), filterable.
-- See services/dlq-admin/internal/deadletter/store/doc.go and
-- internal/deadletter/replay/doc.go.

SET lock_timeout = '5s';

-- The subject of a letter, read from its payload: payout_id (payout
-- commands and outcomes, PSP outcome events), provider and event_id (PSP
-- events), user_id, amount (a JSON number), currency and type (a PSP
-- event's own type). Keys the payload does not have are absent; a payload
-- that is not a JSON object (a poison message, bytes that are not UTF-8) has
-- the subject {}. Declared IMMUTABLE so that a generated column can use it:
-- it depends on nothing but its argument. It never raises, so it can never
-- refuse a dead letter.
CREATE FUNCTION dead_letter_subject(payload bytea) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    doc jsonb;
BEGIN
    doc := convert_from(payload, 'UTF8')::jsonb;
    IF jsonb_typeof(doc) <> 'object' THEN
        RETURN '{}'::jsonb;
    END IF;
    RETURN jsonb_strip_nulls(jsonb_build_object(
        'payout_id', doc->>'payout_id',
        'provider',  doc->>'provider',
        'event_id',  doc->>'event_id',
        'user_id',   doc->>'user_id',
        'amount',    CASE WHEN jsonb_typeof(doc->'amount') = 'number' THEN doc->'amount' END,
        'currency',  doc->>'currency',
        'type',      doc->>'type'));
EXCEPTION WHEN others THEN
    RETURN '{}'::jsonb;
END;
$$;

-- Computed once, when a letter is stored. Adding a stored generated column
-- rewrites the table (ACCESS EXCLUSIVE while it runs); the dead-letter table
-- is small by design.
ALTER TABLE dead_letters ADD COLUMN subject jsonb NOT NULL GENERATED ALWAYS AS (dead_letter_subject(payload)) STORED;

-- What a replay did: republished (an outbox row, replay_outbox_id) or noop
-- (nothing published: the payout or event it is about was already final;
-- replay_subject_state says what it was). Letters replayed before this
-- migration were all republished.
ALTER TABLE dead_letters
    ADD COLUMN replay_outcome       text CHECK (replay_outcome IN ('republished', 'noop')),
    ADD COLUMN replay_subject_state text;
UPDATE dead_letters SET replay_outcome = 'republished' WHERE status = 'replayed';

-- Bulk replays count their no-ops apart from the letters they republished.
ALTER TABLE replay_jobs ADD COLUMN noop integer NOT NULL DEFAULT 0 CHECK (noop >= 0);
ALTER TABLE replay_jobs DROP CONSTRAINT replay_jobs_attempted_within_max;
ALTER TABLE replay_jobs ADD CONSTRAINT replay_jobs_attempted_within_max CHECK (replayed + noop + failed <= max);

-- What a bulk replay did with each letter it reached, written in the
-- letter's own transaction with the job's progress: republished (outbox_id),
-- noop (subject_state), not_replayable (error; the letter stays open) or
-- skipped (resolved by someone else first). A job reaches a letter once: its
-- cursor moves past it in the same transaction.
CREATE TABLE replay_job_letters (
    job_id         bigint      NOT NULL REFERENCES replay_jobs (id),
    dead_letter_id bigint      NOT NULL,
    outcome        text        NOT NULL CHECK (outcome IN ('republished', 'noop', 'not_replayable', 'skipped')),
    outbox_id      bigint,
    subject_state  text,
    error          text,
    at             timestamptz NOT NULL,
    PRIMARY KEY (job_id, dead_letter_id)
);

-- The list's subject filters; each ends in id so that a filtered page is
-- read newest first straight from the index.
CREATE INDEX dead_letters_payout_idx ON dead_letters ((subject->>'payout_id'), id) WHERE subject ? 'payout_id';
CREATE INDEX dead_letters_partition_key_idx ON dead_letters (partition_key, id);
CREATE INDEX dead_letters_correlation_idx ON dead_letters (correlation_id, id);
CREATE INDEX dead_letters_event_type_idx ON dead_letters (event_type, id);
-- "Failed again as letter #N": a replayed message that fails again is
-- stored with the replay_of header naming the letter it replayed.
CREATE INDEX dead_letters_replay_of_idx ON dead_letters ((headers->>'replay_of')) WHERE headers ? 'replay_of';
