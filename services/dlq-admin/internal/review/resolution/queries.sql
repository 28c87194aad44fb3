-- All SQL on payout_resolutions dlq-admin runs, compiled by
-- sqlc into package sqlcdb. dlq-admin is the table's one writer; the
-- worker's verdict (status, psp_answer, decided_at) is in its own table,
-- read with the request through payout_resolutions_state (migration
-- 000032 says how the two combine). Resolution and payout ids are text on
-- the Go side (::text::uuid).

-- name: PayoutForResolution :one
SELECT user_id, status, amount FROM payouts_for_ops WHERE id = (@payout_id::text)::uuid;

-- name: PayoutCorrelation :one
SELECT correlation_id FROM payouts_for_ops WHERE id = (@payout_id::text)::uuid;

-- name: CloseDecided :exec
-- Closes the payout's resolutions the worker has decided: their status
-- becomes the verdict's, so that payout_resolutions_open_idx, which admits
-- one open resolution per payout, admits the next. Run before recording one.
UPDATE payout_resolutions r SET status = v.status
FROM resolution_verdicts_for_ops v
WHERE v.resolution_id = r.id AND r.payout_id = (@payout_id::text)::uuid AND r.status = 'pending';

-- name: InsertResolution :exec
INSERT INTO payout_resolutions (id, payout_id, user_id, outcome, reason, psp_object_id, requested_by, status, created_at)
VALUES ((@id::text)::uuid, (@payout_id::text)::uuid, @user_id, @outcome, @reason, @psp_object_id, @requested_by, @status, @created_at);

-- name: MarkSent :exec
UPDATE payout_resolutions SET status = 'pending', outbox_id = @outbox_id::bigint, approved_by = nullif(@approved_by::text, '')
WHERE id = (@id::text)::uuid;

-- name: RejectResolution :exec
UPDATE payout_resolutions SET status = 'rejected', decided_at = @decided_at::timestamptz
WHERE id = (@id::text)::uuid AND status = 'awaiting_approval';

-- name: ResolutionStatus :one
SELECT status FROM payout_resolutions WHERE id = (@id::text)::uuid FOR UPDATE;

-- name: GetResolution :one
-- approval_id is the latest approval of the resolution (four-eyes), if any.
SELECT r.id::text AS id, r.payout_id::text AS payout_id, r.user_id, r.outcome, r.reason, r.psp_object_id,
       r.requested_by, r.status, r.psp_answer, r.approved_by, r.outbox_id, r.created_at, r.decided_at,
       a.id AS approval_id
FROM payout_resolutions_state r
LEFT JOIN approvals a ON a.id = (SELECT max(l.id) FROM approvals l
                                 WHERE l.kind = 'payout_resolution' AND l.target_id = r.id::text)
WHERE r.id = (@id::text)::uuid;

-- name: ResolutionsOfPayout :many
-- Newest first.
SELECT r.id::text AS id, r.payout_id::text AS payout_id, r.user_id, r.outcome, r.reason, r.psp_object_id,
       r.requested_by, r.status, r.psp_answer, r.approved_by, r.outbox_id, r.created_at, r.decided_at,
       a.id AS approval_id
FROM payout_resolutions_state r
LEFT JOIN approvals a ON a.id = (SELECT max(l.id) FROM approvals l
                                 WHERE l.kind = 'payout_resolution' AND l.target_id = r.id::text)
WHERE r.payout_id = (@payout_id::text)::uuid
ORDER BY r.created_at DESC
LIMIT 100;
