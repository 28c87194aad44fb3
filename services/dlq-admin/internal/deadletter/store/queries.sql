-- The static SQL of package store, compiled by sqlc into package sqlcdb.
-- Two kinds stay in queries.go (see there and pkg/database's doc): the
-- statements whose WHERE clause depends on the filters a request sets
-- (lists, groups, open-letter selections), and the five that return a
-- letter's summary columns (Get, Lock, MarkReplayed, MarkDiscarded,
-- PendingAlerts), which share one column list and one scan.

-- name: MaxID :one
SELECT coalesce(max(id), 0)::bigint AS max_id FROM dead_letters;

-- name: Stats :many
-- Every letter counted once per (topic, status); min(failed_at) of the open
-- group is the oldest open letter of that topic.
SELECT original_topic, status, count(*)::bigint AS count, min(failed_at)::timestamptz AS oldest
FROM dead_letters
GROUP BY original_topic, status
ORDER BY original_topic, status;

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
