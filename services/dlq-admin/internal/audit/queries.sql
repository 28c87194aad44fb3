-- The statements of package audit, compiled by sqlc into package sqlcdb.

-- name: InsertAudit :exec
INSERT INTO audit_log (actor, action, target_type, target_id, reason, detail, at)
VALUES (@actor, @action, @target_type, @target_id, nullif(@reason::text, ''), @detail, @at);
