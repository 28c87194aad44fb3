-- The statements of package approval, compiled by sqlc into package
-- sqlcdb: the approvals table, whatever kind of request a row holds.

-- name: InsertApproval :one
INSERT INTO approvals (kind, target_id, request, summary, requested_by, requested_person, created_at)
VALUES (@kind, @target_id, @request, @summary, @requested_by, @requested_person::text, @created_at)
RETURNING id;

-- name: ApprovalRequester :one
-- The requester's person as recorded when the approval was asked for; ''
-- for an approval from before persons were recorded.
SELECT coalesce(requested_person, '')::text AS requested_person FROM approvals WHERE id = @id;

-- name: GetApproval :one
SELECT id, kind, target_id, request, summary, requested_by, status, decided_by, decision_reason, result_id, created_at, decided_at
FROM approvals WHERE id = @id;

-- name: LockApproval :one
SELECT id, kind, target_id, request, summary, requested_by, status, decided_by, decision_reason, result_id, created_at, decided_at
FROM approvals WHERE id = @id FOR UPDATE;

-- name: ListApprovals :many
-- An empty status lists every status; newest first.
SELECT id, kind, target_id, request, summary, requested_by, status, decided_by, decision_reason, result_id, created_at, decided_at
FROM approvals
WHERE (@status::text = '' OR status = @status)
ORDER BY id DESC
LIMIT @max_rows;

-- name: DecideApproval :one
UPDATE approvals SET status = @status, decided_by = @decided_by::text, decision_reason = nullif(@decision_reason::text, ''),
    result_id = nullif(@result_id::text, ''), decided_at = @decided_at::timestamptz, decided_person = @decided_person::text
WHERE id = @id AND status = 'pending'
RETURNING id, kind, target_id, request, summary, requested_by, status, decided_by, decision_reason, result_id, created_at, decided_at;
