-- The static SQL of package store, compiled by sqlc into package sqlcdb.
-- The statements whose WHERE clause depends on the filters a request sets
-- (lists, groups, open-letter selections) stay in queries.go: see there and
-- pkg/database's doc.

-- name: InsertAudit :exec
INSERT INTO audit_log (actor, action, target_type, target_id, reason, detail, at)
VALUES (@actor, @action, @target_type, @target_id, nullif(@reason::text, ''), @detail, @at);

-- name: MaxID :one
SELECT coalesce(max(id), 0)::bigint AS max_id FROM dead_letters;
