-- The SQL on payouts, payout_transitions, payout_attempts and
-- payout_evidence (store.go, sweep.go), compiled by sqlc into package
-- sqlcdb. Statements the processor pipelines (Transition, Update, Load,
-- RecordSending, FinishCreate) are queued on its pgx.Batch through
-- database.Queue (pipeline.go), so the round trips stay as they were.

-- name: Load :one
SELECT id, user_id, amount, currency, destination, provider, status, attempts,
       coalesce(psp_reference, '')::text AS psp_reference, psp_updated_at, correlation_id,
       outcome_unknown, lookup_needed, coalesce(psp_key, '')::text AS psp_key, first_attempt_at, last_unknown_at, created_at,
       sending_at, coalesce(external_account, '')::text AS external_account,
       coalesce(psp_transfer, '')::text AS psp_transfer
FROM payouts WHERE id = @id
FOR UPDATE;

-- name: Update :exec
UPDATE payouts
SET status = @status, attempts = @attempts, psp_reference = nullif(@psp_reference::text, ''),
    psp_status = coalesce(nullif(@psp_status::text, ''), psp_status),
    psp_updated_at = @psp_updated_at, last_error = nullif(@last_error::text, ''),
    error_class = nullif(@error_class::text, ''), updated_at = now(),
    outcome_unknown = @outcome_unknown, lookup_needed = @lookup_needed, psp_key = nullif(@psp_key::text, ''),
    first_attempt_at = @first_attempt_at, last_unknown_at = @last_unknown_at, sending_at = @sending_at,
    psp_transfer = coalesce(nullif(@psp_transfer::text, ''), psp_transfer)
WHERE id = @id;

-- name: Transition :one
INSERT INTO payout_transitions (payout_id, from_status, to_status, attempt, error, error_class, detail)
VALUES (@payout_id, @from_status, @to_status, @attempt, nullif(@error::text, ''), nullif(@error_class::text, ''), @detail)
RETURNING id;

-- name: Attempts :many
-- Every recorded failure of the payout, for dead letters.
SELECT at, coalesce(error, '')::text AS error, coalesce(error_class, '')::text AS error_class FROM payout_transitions
WHERE payout_id = @payout_id AND error IS NOT NULL ORDER BY id;

-- name: RecordAttempt :exec
INSERT INTO payout_attempts (payout_id, attempt, kind, idempotency_key, outcome, psp_reference, error, at, step)
VALUES (@payout_id, @attempt, @kind, nullif(@idempotency_key::text, ''), @outcome, nullif(@psp_reference::text, ''),
        nullif(@error::text, ''), @at, nullif(@step::text, ''));

-- name: BeginCreate :one
-- A create is about to be sent (attempt.go): its key, attempt number and
-- send time are committed first, on the payout (first_attempt_at,
-- sending_at, and psp_key when a new key generation was taken) and as a
-- payout_attempts row with outcome 'sending'. Nothing is written, and no
-- row returned, when the payout is no longer SENDING_TO_GATEWAY (an
-- outcome event moved it meanwhile): the create is then not sent. A
-- connected account's payout records the transfer it follows (psp_transfer)
-- with it: from then on no transfer is sent for the payout again.
WITH sending AS (
    UPDATE payouts
    SET first_attempt_at = coalesce(payouts.first_attempt_at, @at::timestamptz), sending_at = @at::timestamptz,
        psp_key = coalesce(nullif(@new_psp_key::text, ''), payouts.psp_key),
        psp_transfer = coalesce(nullif(@psp_transfer::text, ''), payouts.psp_transfer)
    WHERE payouts.id = @payout_id::uuid AND payouts.status = 'SENDING_TO_GATEWAY'
    RETURNING payouts.id AS sending_id
)
INSERT INTO payout_attempts (payout_id, attempt, kind, idempotency_key, outcome, at, step)
SELECT sending.sending_id, @attempt::integer, 'create', @idempotency_key::text, 'sending', @at::timestamptz,
       nullif(@step::text, '') FROM sending
RETURNING payout_attempts.id;

-- name: RecordSending :one
-- A create about to be sent whose payout row (first_attempt_at,
-- sending_at) is written in the same transaction: the one that moves the
-- payout to SENDING_TO_GATEWAY (processor.go, step 1). Its payout_attempts
-- row with outcome 'sending', as BeginCreate writes it.
INSERT INTO payout_attempts (payout_id, attempt, kind, idempotency_key, outcome, at, step)
VALUES (@payout_id, @attempt, 'create', @idempotency_key::text, 'sending', @at, nullif(@step::text, ''))
RETURNING id;

-- name: FinishCreate :exec
-- The answer to a create written by BeginCreate.
UPDATE payout_attempts
SET outcome = @outcome, psp_reference = nullif(@psp_reference::text, ''), error = nullif(@error::text, '')
WHERE id = @id AND outcome = 'sending';

-- name: AbandonCreates :exec
-- A resume found the payout's creates whose answers were never recorded:
-- they may have executed.
UPDATE payout_attempts SET outcome = 'unknown', error = @error::text
WHERE payout_id = @payout_id AND outcome = 'sending';

-- name: RecordEvidence :exec
INSERT INTO payout_evidence (payout_id, provider, event_id, event_type, amount, currency, psp_reference, verdict, reason)
VALUES (@payout_id, @provider, @event_id, @event_type, @amount, nullif(@currency::text, ''),
        nullif(@psp_reference::text, ''), @verdict, nullif(@reason::text, ''));

-- name: SweepLock :one
-- The sweeper (sweep.go) runs one at a time across replicas.
SELECT pg_try_advisory_lock(hashtext(@name::text)) AS ok;

-- name: SweepUnlock :exec
SELECT pg_advisory_unlock(hashtext(@name::text));

-- name: SweepCandidates :many
-- The payouts that have waited at the PSP since before @since without a
-- step or a lookup that got an answer, and those pending there since
-- before @escalate_before (past their deadline: looked up at once, and
-- escalated if still pending), oldest first (payouts_status_idx).
SELECT p.id FROM payouts p
WHERE p.status IN ('SENT_TO_GATEWAY', 'AWAITING_RESPONSE')
  AND (p.status_since < @escalate_before
       OR p.updated_at < @since
          AND NOT EXISTS (SELECT 1 FROM payout_attempts a
                          WHERE a.payout_id = p.id AND a.kind = 'lookup' AND a.outcome <> 'unknown' AND a.at >= @since))
ORDER BY p.updated_at
LIMIT @max;

-- name: Overdue :many
-- The payouts in @status since before @before (past the state's deadline)
-- that were not resumed since then either (a payout whose command was
-- published again waits a deadline more) and were resumed fewer than
-- @resumes_below times, oldest first (payouts_status_since_idx).
SELECT id FROM payouts
WHERE status = @status AND status_since < @before
  AND (deadline_resumed_at IS NULL OR deadline_resumed_at < @before)
  AND deadline_resumes < @resumes_below
ORDER BY status_since
LIMIT @max;

-- name: DeadlineState :one
-- When the payout entered its state, and how often the sweeper resumed it.
SELECT status_since, deadline_resumes FROM payouts WHERE id = @id;

-- name: CountResume :exec
-- The sweeper published the payout's command again (deadline.go).
UPDATE payouts SET deadline_resumes = deadline_resumes + 1, deadline_resumed_at = @at, updated_at = now()
WHERE id = @id;

-- name: RetryDue :one
-- When the payout's latest scheduled retry was due (its RETRYING
-- transition's next_attempt_at; the transition's time if it has none).
SELECT coalesce((detail->>'next_attempt_at')::timestamptz, at)::timestamptz AS due
FROM payout_transitions
WHERE payout_id = @payout_id AND to_status = 'RETRYING'
ORDER BY id DESC
LIMIT 1;

-- name: PayoutAges :many
-- Per unfinished state, when its oldest payout entered it (@now: none) and
-- how many entered it before the state's deadline (@*_before: past it),
-- read at every scrape of the age gauges (ages.go). Each state is written
-- out rather than a parameter: the literal proves the predicate of the
-- partial index payouts_status_since_idx, so each state is an index probe
-- for the oldest and a range scan of the overdue ones under any plan (a
-- parameter, under a generic plan, loses the index and scans the table).
SELECT 'INITIALIZED'::text AS status,
       coalesce((SELECT min(p.status_since) FROM payouts p WHERE p.status = 'INITIALIZED'), @now::timestamptz)::timestamptz AS oldest,
       (SELECT count(*) FROM payouts p WHERE p.status = 'INITIALIZED' AND p.status_since < @initialized_before::timestamptz)::bigint AS overdue
UNION ALL
SELECT 'SENDING_TO_GATEWAY'::text AS status,
       coalesce((SELECT min(p.status_since) FROM payouts p WHERE p.status = 'SENDING_TO_GATEWAY'), @now::timestamptz)::timestamptz AS oldest,
       (SELECT count(*) FROM payouts p WHERE p.status = 'SENDING_TO_GATEWAY' AND p.status_since < @sending_before::timestamptz)::bigint AS overdue
UNION ALL
SELECT 'RETRYING'::text AS status,
       coalesce((SELECT min(p.status_since) FROM payouts p WHERE p.status = 'RETRYING'), @now::timestamptz)::timestamptz AS oldest,
       (SELECT count(*) FROM payouts p WHERE p.status = 'RETRYING' AND p.status_since < @retrying_before::timestamptz)::bigint AS overdue
UNION ALL
SELECT 'SENT_TO_GATEWAY'::text AS status,
       coalesce((SELECT min(p.status_since) FROM payouts p WHERE p.status = 'SENT_TO_GATEWAY'), @now::timestamptz)::timestamptz AS oldest,
       (SELECT count(*) FROM payouts p WHERE p.status = 'SENT_TO_GATEWAY' AND p.status_since < @pending_before::timestamptz)::bigint AS overdue
UNION ALL
SELECT 'AWAITING_RESPONSE'::text AS status,
       coalesce((SELECT min(p.status_since) FROM payouts p WHERE p.status = 'AWAITING_RESPONSE'), @now::timestamptz)::timestamptz AS oldest,
       (SELECT count(*) FROM payouts p WHERE p.status = 'AWAITING_RESPONSE' AND p.status_since < @pending_before::timestamptz)::bigint AS overdue
UNION ALL
SELECT 'NEEDS_REVIEW'::text AS status,
       coalesce((SELECT min(p.status_since) FROM payouts p WHERE p.status = 'NEEDS_REVIEW'), @now::timestamptz)::timestamptz AS oldest,
       (SELECT count(*) FROM payouts p WHERE p.status = 'NEEDS_REVIEW' AND p.status_since < @review_before::timestamptz)::bigint AS overdue;

-- name: OpenReceivables :many
-- Per currency, how many users owe money (owed > 0: a refund or dispute
-- took more than the wallet held): the condition AegisReceivableOpen pages
-- on; a currency where nobody owes has no row. Run at each scrape
-- (receivables.go): a scan of wallets_owing_idx, which holds only the
-- wallets that owe.
SELECT currency::text AS currency, count(*)::bigint AS owing
FROM wallets WHERE kind = 'user' AND owed > 0
GROUP BY currency ORDER BY currency;

-- name: LoadResolution :one
-- An operator's resolution request as dlq-admin stored it, with its status
-- (pending until decided; the verdict of either release's worker once
-- decided): resolve.go reads it after taking the payout's row lock, under
-- which every verdict on the payout is written, so it sees any verdict
-- committed before.
SELECT payout_id, outcome, reason, psp_object_id, requested_by, coalesce(approved_by, '')::text AS approved_by, status
FROM payout_resolutions_for_worker WHERE id = @id;

-- name: DecideResolution :execrows
-- The worker's verdict, in the transaction of the ledger posting it decides;
-- no row when the resolution already has one.
INSERT INTO resolution_verdicts (resolution_id, status, psp_answer, decided_at)
VALUES (@resolution_id, @status, @psp_answer, @decided_at)
ON CONFLICT (resolution_id) DO NOTHING;
