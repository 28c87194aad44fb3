-- The payouts read model, compiled by sqlc into package sqlcdb: what the
-- console shows of a payout and the payouts list. Read-only: dlq-admin
-- never writes a payout.

-- name: GetPayout :one
SELECT id::text AS id, user_id, amount, currency, provider, destination, coalesce(destination_id::text, '')::text AS destination_id,
       status, attempts, psp_reference, psp_status, last_error, error_class, correlation_id, created_at, updated_at
FROM payouts_for_ops WHERE id = @id::uuid;

-- name: PayoutTransitions :many
SELECT from_status, to_status, attempt, error, error_class, at
FROM payout_transitions_for_ops WHERE payout_id = @payout_id::uuid ORDER BY id LIMIT @max_rows;

-- name: PayoutAttempts :many
SELECT attempt, kind, outcome, psp_reference, error, at
FROM payout_attempts_for_ops WHERE payout_id = @payout_id::uuid ORDER BY id LIMIT @max_rows;

-- name: ListPayouts :many
-- The payouts waiting for an operator (@reviewable: NEEDS_REVIEW) first,
-- then oldest first; a page continues after the cursor's (rank, created_at,
-- id) when @after is set. Absent values are
-- '' and 0 (ids start at 1), which the Go side turns into nil.
SELECT p.id::text AS id, p.user_id, p.amount, p.currency, p.provider, p.destination, p.status, p.psp_reference,
       p.psp_status, p.last_error, p.error_class, p.created_at, p.updated_at,
       coalesce((SELECT d.id FROM dead_letters d WHERE d.subject ? 'payout_id' AND d.subject->>'payout_id' = p.id::text
        ORDER BY d.id DESC LIMIT 1), 0)::bigint AS dead_letter_id,
       coalesce(r.id::text, '')::text AS resolution_id, coalesce(r.status, '')::text AS resolution_status
FROM payouts_for_ops p
LEFT JOIN LATERAL (SELECT id, status FROM payout_resolutions_state WHERE payout_id = p.id
                   ORDER BY created_at DESC, id DESC LIMIT 1) r ON true
WHERE (@status::text = '' OR p.status = @status::text)
  AND (NOT @after::bool OR (CASE WHEN p.status = ANY(@reviewable::text[]) THEN 0 ELSE 1 END, p.created_at, p.id)
       > (@rank::int, @at::timestamptz, @after_id::uuid))
ORDER BY CASE WHEN p.status = ANY(@reviewable::text[]) THEN 0 ELSE 1 END, p.created_at, p.id
LIMIT @max_rows;
