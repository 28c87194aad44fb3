-- All SQL on replay_jobs and replay_job_letters, and what a replay looks at
-- to decide whether it would change anything, compiled by sqlc into package
-- sqlcdb. The letters themselves are read and resolved through package
-- store. Every statement returning a job returns the same columns (GetJob's
-- row: replayJob converts the others to it).

-- name: InsertJob :one
INSERT INTO replay_jobs (actor, reason, filter, max, upto_id, created_at)
VALUES (@actor, nullif(@reason::text, ''), @filter, @max, @upto_id, @created_at)
RETURNING id, actor, coalesce(reason, '')::text AS reason, filter, max, upto_id, status, matched, replayed, noop, skipped,
    failed, last_error, cursor_id, created_at, started_at, finished_at;

-- name: GetJob :one
SELECT id, actor, coalesce(reason, '')::text AS reason, filter, max, upto_id, status, matched, replayed, noop, skipped,
    failed, last_error, cursor_id, created_at, started_at, finished_at
FROM replay_jobs WHERE id = @id;

-- name: ListJobs :many
SELECT id, actor, coalesce(reason, '')::text AS reason, filter, max, upto_id, status, matched, replayed, noop, skipped,
    failed, last_error, cursor_id, created_at, started_at, finished_at
FROM replay_jobs ORDER BY id DESC LIMIT @max_rows;

-- name: LockJobForWork :one
-- The job a River worker is about to work, locked until it has taken it:
-- who held it last (locked_by: set while a worker works it, NULL once a
-- worker let go cleanly) says whether this is a takeover.
SELECT status, coalesce(locked_by, '')::text AS locked_by, (started_at IS NOT NULL)::bool AS started
FROM replay_jobs WHERE id = @id
FOR UPDATE;

-- name: StartJob :one
-- The worker takes the job: locked_by is a fencing token, unique per River
-- work attempt. A worker whose token was replaced (River rescued its job as
-- stuck and another client took it) finds that its next Advance matches
-- nothing, and stops.
UPDATE replay_jobs
SET status = 'running', started_at = coalesce(started_at, @now::timestamptz), locked_by = @owner::text,
    locked_until = NULL,
    matched = CASE WHEN started_at IS NULL THEN @matched::int ELSE matched END
WHERE id = @id AND status IN ('queued', 'running')
RETURNING id, actor, coalesce(reason, '')::text AS reason, filter, max, upto_id, status, matched, replayed, noop, skipped,
    failed, last_error, cursor_id, created_at, started_at, finished_at;

-- name: Advance :one
-- Records one letter's outcome, in the letter's own transaction. It matches
-- nothing unless this worker's token still holds the running job (not
-- cancelled, not taken over), which rolls the letter's replay back.
UPDATE replay_jobs
SET replayed = replayed + @replayed::int, skipped = skipped + @skipped::int, failed = failed + @failed::int,
    last_error = coalesce(sqlc.narg(last_error)::text, last_error), cursor_id = greatest(cursor_id, @cursor_id::bigint),
    noop = noop + @noop::int
WHERE id = @id AND status = 'running' AND locked_by = @owner::text
RETURNING id, actor, coalesce(reason, '')::text AS reason, filter, max, upto_id, status, matched, replayed, noop, skipped,
    failed, last_error, cursor_id, created_at, started_at, finished_at;

-- name: FinishJob :one
UPDATE replay_jobs
SET status = @status::text, finished_at = @finished_at::timestamptz, last_error = coalesce(sqlc.narg(last_error)::text, last_error),
    locked_by = NULL, locked_until = NULL
WHERE id = @id AND status = 'running' AND locked_by = @owner::text
RETURNING id, actor, coalesce(reason, '')::text AS reason, filter, max, upto_id, status, matched, replayed, noop, skipped,
    failed, last_error, cursor_id, created_at, started_at, finished_at;

-- name: ReleaseJob :exec
-- Lets go of a running job without finishing it (the end of a slice,
-- shutdown, a database error): the next River attempt resumes it without
-- counting as a takeover.
UPDATE replay_jobs SET locked_by = NULL, locked_until = NULL
WHERE id = @id AND status = 'running' AND locked_by = @owner::text;

-- name: LockJob :one
SELECT status FROM replay_jobs WHERE id = @id FOR UPDATE;

-- name: CancelJob :one
UPDATE replay_jobs
SET status = 'cancelled', finished_at = @finished_at::timestamptz, locked_by = NULL, locked_until = NULL
WHERE id = @id AND status IN ('queued', 'running')
RETURNING id, actor, coalesce(reason, '')::text AS reason, filter, max, upto_id, status, matched, replayed, noop, skipped,
    failed, last_error, cursor_id, created_at, started_at, finished_at;

-- name: ActiveJobIDs :many
-- The jobs still queued or running, oldest first: each must have a River
-- job that will still work it (EndOrphanedJobs).
SELECT id FROM replay_jobs WHERE status IN ('queued', 'running') ORDER BY id LIMIT @max_rows;

-- name: EndOrphanedJob :one
-- Ends, as failed with why, a job still queued or running whose River job
-- will never work it; no row when it ended meanwhile.
UPDATE replay_jobs
SET status = 'failed', finished_at = @finished_at::timestamptz, last_error = @last_error::text, locked_by = NULL,
    locked_until = NULL
WHERE id = @id AND status IN ('queued', 'running')
RETURNING id, actor, coalesce(reason, '')::text AS reason, filter, max, upto_id, status, matched, replayed, noop, skipped,
    failed, last_error, cursor_id, created_at, started_at, finished_at;

-- name: RecordJobLetter :exec
INSERT INTO replay_job_letters (job_id, dead_letter_id, outcome, outbox_id, subject_state, error, at)
VALUES (@job_id, @dead_letter_id, @outcome, sqlc.narg(outbox_id), nullif(@subject_state::text, ''), nullif(@error::text, ''), @at);

-- name: JobLetters :many
SELECT dead_letter_id, outcome, outbox_id, subject_state, error, at
FROM replay_job_letters
WHERE job_id = @job_id AND dead_letter_id > @after::bigint
ORDER BY dead_letter_id
LIMIT @max_rows;

-- name: JobExists :one
SELECT EXISTS (SELECT 1 FROM replay_jobs WHERE id = @id);

-- What a replay looks at to decide whether it would change anything (see
-- subject.go). Read without locks: the states that make a replay a no-op are
-- left only through PSP evidence, never through a replayed message.

-- name: PayoutStatus :one
SELECT status FROM payouts_for_ops WHERE id = @id;

-- A letter of the same payout's commands written after letter id (its
-- payload names the payout; a payload need not be JSON, so it is searched
-- as bytes).
-- name: NewerPayoutLetter :one
SELECT COALESCE(max(id), 0)::bigint AS newer FROM dead_letters
WHERE id > @id AND original_topic = @topic
  AND position(convert_to(@payout_id::text, 'UTF8') IN payload) > 0;

-- name: CreditPosted :one
SELECT EXISTS (SELECT 1 FROM ledger_transactions_for_ops WHERE kind = 'credit' AND reference = @reference);

-- name: EvidenceApplied :one
-- The payout an outcome event was applied to, and that payout's state now.
SELECT p.status
FROM payout_evidence_for_ops e JOIN payouts_for_ops p ON p.id = e.payout_id
WHERE e.payout_id = @payout_id AND e.provider = @provider AND e.event_id = @event_id AND e.verdict = 'applied'
LIMIT 1;

-- name: ResolutionDecided :one
SELECT status FROM payout_resolutions_state WHERE id = @id;

-- name: LettersHoldingMoney :many
-- Of the letters @ids, those about a payout that still holds money: not
-- finished (@closed: SUCCEEDED, FINALIZED), its hold posted and neither settled nor
-- released. Discarding such a letter would strand the hold with nobody
-- asked (discard.go). The payout id is cast only when it is a UUID, so a
-- letter whose payload names a malformed one is not an error.
SELECT d.id AS dead_letter_id, p.id::text AS payout_id, p.status
FROM dead_letters d
JOIN payouts_for_ops p ON p.id = CASE WHEN d.subject->>'payout_id' ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                              THEN (d.subject->>'payout_id')::uuid END
WHERE d.id = ANY(@ids::bigint[])
  AND p.status <> ALL(@closed::text[])
  AND EXISTS (SELECT 1 FROM ledger_transactions_for_ops t WHERE t.kind = 'payout_hold' AND t.reference = p.id::text)
  AND NOT EXISTS (SELECT 1 FROM ledger_transactions_for_ops t
                  WHERE t.kind IN ('payout_settle', 'payout_release') AND t.reference = p.id::text)
ORDER BY d.id;
