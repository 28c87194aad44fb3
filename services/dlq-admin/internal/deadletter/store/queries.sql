-- The SQL of package store, compiled by sqlc into package sqlcdb.
--
-- Every statement that returns letters returns the same columns (List's
-- row; the others are converted to it): the summary, then the payload,
-- headers and retry history, which only Get and Lock read and the others
-- return as NULL, so that a list never reads a payload (only its size).
--
-- The statements filtered by a request (List, Groups, and the open-letter
-- selections of the bulk actions) take the request's conditions through
-- the filters template (pkg/database's Templated; filters.go builds them
-- from constant conditions, every value a parameter): their WHERE clause
-- then holds only the filters a request sets, each a plain equality or
-- range the planner serves from its index (dead_letters_list_idx for id
-- order, the per-filter indexes of migration 000009), which one static
-- statement with "no filter when the parameter is empty" conditions would
-- not be under a generic plan.

-- name: List :many
-- A page of letters: id below the cursor (MaxInt64 on the first page),
-- newest first.
SELECT id, source, original_topic, original_partition, original_offset,
       coalesce(consumer_group, '')::text AS consumer_group, outbox_id, partition_key, event_type,
       error, error_class, retry_count, first_failure_at, failed_at, correlation_id,
       status, replay_count, replay_outbox_id, resolved_by, resolved_at,
       resolution_reason, created_at, octet_length(payload)::int AS payload_bytes,
       subject, replay_outcome, replay_subject_state,
       NULL::bytea AS payload, NULL::jsonb AS headers, NULL::jsonb AS retry_history
FROM dead_letters
WHERE id < @below::bigint AND /* TEMPLATE_BEGIN: filters */ true /* TEMPLATE_END */
ORDER BY id DESC
LIMIT @max_rows;

-- name: Groups :many
-- The letters grouped by error class and normalised error message, biggest
-- group first; sample_id is the group's newest letter. The message's ids
-- (UUIDs, then any run of digits, with the letters and underscores glued to
-- it: po_1Abc9, evt_123) become placeholders, so that "payout 3f2a…
-- failed: account_invalid" of eight payouts is one group.
SELECT error_class,
       regexp_replace(regexp_replace(regexp_replace(left(error, 1000),
           '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<id>', 'gi'),
           '[A-Za-z_]*[0-9][A-Za-z0-9_]*', '<n>', 'g'),
           '\s+', ' ', 'g')::text AS message,
       count(*)::bigint AS count, min(failed_at)::timestamptz AS oldest, max(failed_at)::timestamptz AS newest,
       max(id)::bigint AS sample_id, (array_agg(error ORDER BY id DESC))[1]::text AS sample_error,
       array_agg(DISTINCT original_topic ORDER BY original_topic)::text[] AS topics
FROM dead_letters
WHERE /* TEMPLATE_BEGIN: filters */ true /* TEMPLATE_END */
GROUP BY 1, 2
ORDER BY 3 DESC, 6 DESC
LIMIT @max_rows;

-- name: Get :one
SELECT id, source, original_topic, original_partition, original_offset,
       coalesce(consumer_group, '')::text AS consumer_group, outbox_id, partition_key, event_type,
       error, error_class, retry_count, first_failure_at, failed_at, correlation_id,
       status, replay_count, replay_outbox_id, resolved_by, resolved_at,
       resolution_reason, created_at, octet_length(payload)::int AS payload_bytes,
       subject, replay_outcome, replay_subject_state,
       payload, headers, retry_history
FROM dead_letters
WHERE id = @id;

-- name: Lock :one
-- One letter, whole, locked for the rest of the transaction: replay and
-- discard decide on its status under this lock, so two operators (or a
-- bulk job and an operator) cannot both resolve it.
SELECT id, source, original_topic, original_partition, original_offset,
       coalesce(consumer_group, '')::text AS consumer_group, outbox_id, partition_key, event_type,
       error, error_class, retry_count, first_failure_at, failed_at, correlation_id,
       status, replay_count, replay_outbox_id, resolved_by, resolved_at,
       resolution_reason, created_at, octet_length(payload)::int AS payload_bytes,
       subject, replay_outcome, replay_subject_state,
       payload, headers, retry_history
FROM dead_letters
WHERE id = @id
FOR UPDATE;

-- name: MarkReplayed :one
-- MarkReplayed and MarkDiscarded re-check status = 'open': the lock
-- already guarantees it, and the condition keeps the statements safe on
-- their own.
UPDATE dead_letters
SET status = 'replayed', resolved_by = @resolved_by::text, resolved_at = @resolved_at::timestamptz,
    resolution_reason = nullif(@reason::text, ''), replay_count = replay_count + 1,
    replay_outbox_id = sqlc.narg(replay_outbox_id)::bigint, replay_outcome = @replay_outcome::text,
    replay_subject_state = nullif(@replay_subject_state::text, '')
WHERE id = @id AND status = 'open'
RETURNING id, source, original_topic, original_partition, original_offset,
       coalesce(consumer_group, '')::text AS consumer_group, outbox_id, partition_key, event_type,
       error, error_class, retry_count, first_failure_at, failed_at, correlation_id,
       status, replay_count, replay_outbox_id, resolved_by, resolved_at,
       resolution_reason, created_at, octet_length(payload)::int AS payload_bytes,
       subject, replay_outcome, replay_subject_state,
       NULL::bytea AS payload, NULL::jsonb AS headers, NULL::jsonb AS retry_history;

-- name: MarkDiscarded :one
UPDATE dead_letters
SET status = 'discarded', resolved_by = @resolved_by::text, resolved_at = @resolved_at::timestamptz,
    resolution_reason = @reason::text
WHERE id = @id AND status = 'open'
RETURNING id, source, original_topic, original_partition, original_offset,
       coalesce(consumer_group, '')::text AS consumer_group, outbox_id, partition_key, event_type,
       error, error_class, retry_count, first_failure_at, failed_at, correlation_id,
       status, replay_count, replay_outbox_id, resolved_by, resolved_at,
       resolution_reason, created_at, octet_length(payload)::int AS payload_bytes,
       subject, replay_outcome, replay_subject_state,
       NULL::bytea AS payload, NULL::jsonb AS headers, NULL::jsonb AS retry_history;

-- name: PendingAlerts :many
-- Claims letters nobody has been alerted about. SKIP LOCKED lets several
-- dlq-admin replicas sweep at once without alerting twice.
SELECT id, source, original_topic, original_partition, original_offset,
       coalesce(consumer_group, '')::text AS consumer_group, outbox_id, partition_key, event_type,
       error, error_class, retry_count, first_failure_at, failed_at, correlation_id,
       status, replay_count, replay_outbox_id, resolved_by, resolved_at,
       resolution_reason, created_at, octet_length(payload)::int AS payload_bytes,
       subject, replay_outcome, replay_subject_state,
       NULL::bytea AS payload, NULL::jsonb AS headers, NULL::jsonb AS retry_history
FROM dead_letters
WHERE alert_pending
ORDER BY id
LIMIT @max_rows
FOR UPDATE SKIP LOCKED;

-- The open letters of a bulk action's selection (after < id <= upto and
-- its filters), walking dead_letters_open_id_idx in id order, oldest first,
-- as the letters failed.

-- name: OpenIDs :many
SELECT id FROM dead_letters
WHERE status = 'open' AND id > @after::bigint AND id <= @upto::bigint
  AND /* TEMPLATE_BEGIN: filters */ true /* TEMPLATE_END */
ORDER BY id
LIMIT @max_rows;

-- name: CountOpen :one
SELECT count(*)::bigint AS count FROM dead_letters
WHERE status = 'open' AND id > @after::bigint AND id <= @upto::bigint
  AND /* TEMPLATE_BEGIN: filters */ true /* TEMPLATE_END */;

-- name: LockOpen :many
-- As OpenIDs, locking the letters until the transaction ends. A letter
-- resolved while this waits for its lock is re-checked against
-- status = 'open' by Postgres and left out.
SELECT id FROM dead_letters
WHERE status = 'open' AND id > @after::bigint AND id <= @upto::bigint
  AND /* TEMPLATE_BEGIN: filters */ true /* TEMPLATE_END */
ORDER BY id
LIMIT @max_rows
FOR UPDATE;

-- name: MaxID :one
SELECT coalesce(max(id), 0)::bigint AS max_id FROM dead_letters;

-- name: Stats :many
-- Every letter counted once per (topic, status); min(failed_at) of the open
-- group is the oldest open letter of that topic.
SELECT original_topic, status, count(*)::bigint AS count, min(failed_at)::timestamptz AS oldest
FROM dead_letters
GROUP BY original_topic, status
ORDER BY original_topic, status;

-- name: OpenByClass :many
-- Open letters per (original topic, error class): the condition
-- aegis_dlq_open_letters exports (one open letter of a class pages until an
-- operator replays or discards it).
SELECT original_topic, error_class, count(*)::bigint AS count
FROM dead_letters
WHERE status = 'open'
GROUP BY original_topic, error_class
ORDER BY original_topic, error_class;

-- name: FailedAgain :many
-- The letters a replay of letter @id became: the replayed message carries
-- replay_of (dead_letters_replay_of_idx).
SELECT id FROM dead_letters
WHERE headers ? 'replay_of' AND headers->>'replay_of' = (@id::bigint)::text
ORDER BY id;

-- name: DiscardMany :many
-- Discards the letters @ids (locked by the caller), each with its own
-- audit_log row, in one statement.
WITH done AS (
    UPDATE dead_letters
    SET status = 'discarded', resolved_by = @resolved_by::text, resolved_at = @resolved_at::timestamptz,
        resolution_reason = @reason::text
    WHERE id = ANY(@ids::bigint[]) AND status = 'open'
    RETURNING id, original_topic, error_class
), audited AS (
    INSERT INTO audit_log (actor, action, target_type, target_id, reason, detail, at)
    SELECT @resolved_by::text, @action::text, @target_type::text, id::text, @reason::text,
           jsonb_build_object('topic', original_topic, 'error_class', error_class, 'bulk', true), @resolved_at::timestamptz
    FROM done
)
SELECT id FROM done ORDER BY id;

-- name: ClearAlerts :exec
UPDATE dead_letters SET alert_pending = false WHERE id = ANY(@ids::bigint[]);
