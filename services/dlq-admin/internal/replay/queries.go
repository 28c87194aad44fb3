package replay

// All SQL on replay_jobs. The letters themselves are read and resolved
// through package store.

const jobColumns = `
    id, actor, coalesce(reason, ''), filter, max, upto_id, status, matched, replayed, noop, skipped,
    failed, last_error, cursor_id, created_at, started_at, finished_at`

const sqlInsertJob = `
INSERT INTO replay_jobs (actor, reason, filter, max, upto_id, created_at)
VALUES ($1, nullif($2, ''), $3, $4, $5, $6)
RETURNING ` + jobColumns

const sqlGetJob = `SELECT ` + jobColumns + ` FROM replay_jobs WHERE id = $1`

const sqlListJobs = `SELECT ` + jobColumns + ` FROM replay_jobs ORDER BY id DESC LIMIT $1`

// sqlNextJob finds the oldest job a runner may take: queued, or running
// under a lease that ran out (its runner died or let go). SKIP LOCKED: a job
// another replica is claiming right now is left to it.
const sqlNextJob = `
SELECT ` + jobColumns + `
FROM replay_jobs
WHERE status = 'queued'
   OR (status = 'running' AND (locked_until IS NULL OR locked_until < $1))
ORDER BY id
LIMIT 1
FOR UPDATE SKIP LOCKED`

const sqlStartJob = `
UPDATE replay_jobs
SET status = 'running', started_at = coalesce(started_at, $2), locked_by = $3, locked_until = $4,
    matched = CASE WHEN started_at IS NULL THEN $5 ELSE matched END
WHERE id = $1
RETURNING ` + jobColumns

// sqlAdvance records one letter's outcome and extends the lease, in the
// letter's own transaction. It matches nothing unless this runner still
// owns the running job, which rolls the letter's replay back.
const sqlAdvance = `
UPDATE replay_jobs
SET replayed = replayed + $3, skipped = skipped + $4, failed = failed + $5,
    last_error = coalesce($6, last_error), cursor_id = greatest(cursor_id, $7), locked_until = $8,
    noop = noop + $9
WHERE id = $1 AND status = 'running' AND locked_by = $2
RETURNING ` + jobColumns

const sqlHeartbeat = `
UPDATE replay_jobs SET locked_until = $3
WHERE id = $1 AND status = 'running' AND locked_by = $2`

const sqlFinishJob = `
UPDATE replay_jobs
SET status = $3, finished_at = $4, last_error = coalesce($5, last_error), locked_by = NULL, locked_until = NULL
WHERE id = $1 AND status = 'running' AND locked_by = $2
RETURNING ` + jobColumns

// sqlReleaseJob lets go of a running job without finishing it (shutdown, a
// database error): any runner may resume it at once.
const sqlReleaseJob = `
UPDATE replay_jobs SET locked_by = NULL, locked_until = NULL
WHERE id = $1 AND status = 'running' AND locked_by = $2`

const sqlLockJob = `SELECT status FROM replay_jobs WHERE id = $1 FOR UPDATE`

const sqlCancelJob = `
UPDATE replay_jobs
SET status = 'cancelled', finished_at = $2, locked_by = NULL, locked_until = NULL
WHERE id = $1 AND status IN ('queued', 'running')
RETURNING ` + jobColumns

// What a replay looks at to decide whether it would change anything (see
// subject.go). Read without locks: the states that make a replay a no-op are
// left only through PSP evidence, never through a replayed message.

const sqlPayoutStatus = `SELECT status FROM payouts WHERE id = $1`

const sqlCreditPosted = `
SELECT EXISTS (SELECT 1 FROM ledger_transactions WHERE kind = 'credit' AND reference = $1)`

// sqlEvidenceApplied finds the payout an outcome event was applied to, and
// that payout's state now.
const sqlEvidenceApplied = `
SELECT p.status
FROM payout_evidence e JOIN payouts p ON p.id = e.payout_id
WHERE e.payout_id = $1 AND e.provider = $2 AND e.event_id = $3 AND e.verdict = 'applied'
LIMIT 1`

const sqlRecordJobLetter = `
INSERT INTO replay_job_letters (job_id, dead_letter_id, outcome, outbox_id, subject_state, error, at)
VALUES ($1, $2, $3, $4, nullif($5, ''), nullif($6, ''), $7)`

const sqlJobLetters = `
SELECT dead_letter_id, outcome, outbox_id, subject_state, error, at
FROM replay_job_letters
WHERE job_id = $1 AND dead_letter_id > $2
ORDER BY dead_letter_id
LIMIT $3`

const sqlJobExists = `SELECT EXISTS (SELECT 1 FROM replay_jobs WHERE id = $1)`
