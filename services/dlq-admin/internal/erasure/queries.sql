-- The statements of package erasure, compiled by sqlc into package sqlcdb:
-- the erasures table (dlq-admin's) and the erasure itself, through the
-- schema owner's erase_user_data (migration 000050).

-- name: EraseUserData :one
-- Raises AEG01 (unknown user), AEG02 (money held or owed), AEG03 (a payout
-- not closed), AEG04 (an unpublished outbox row or an open dead letter).
SELECT erase_user_data(@user_id::text, @pseudonym::text, @closed::text[], @check_only::boolean)::jsonb AS counts;

-- name: ErasedBefore :one
-- How many erasures of this person have run: a second one gives its rows a
-- pseudonym of their own (unique keys such as a wallet's would collide).
SELECT count(*) FROM erasures WHERE status = 'erased' AND (pseudonym = @pseudonym OR pseudonym LIKE @pseudonym || '.%');

-- name: InsertErasure :one
INSERT INTO erasures (pseudonym, user_id, reason, requested_by, requested_at)
VALUES (@pseudonym, @user_id, @reason, @requested_by, @requested_at)
RETURNING id;

-- name: SetErasureApproval :exec
UPDATE erasures SET approval_id = @approval_id WHERE id = @id;

-- name: LockErasure :one
SELECT id, pseudonym, coalesce(user_id, '')::text AS user_id, status, reason, requested_by, approval_id
FROM erasures WHERE id = @id FOR UPDATE;

-- name: FinishErasure :exec
-- The user id is forgotten whatever the decision: an erased user is
-- recorded only as the pseudonym.
UPDATE erasures SET status = @status, user_id = NULL, approved_by = nullif(@approved_by::text, ''),
    counts = @counts, decided_at = @decided_at
WHERE id = @id AND status = 'pending';

-- name: GetErasure :one
SELECT id, pseudonym, status, reason, requested_by, approval_id, approved_by, counts, requested_at, decided_at
FROM erasures WHERE id = @id;

-- name: ListErasures :many
SELECT id, pseudonym, status, reason, requested_by, approval_id, approved_by, counts, requested_at, decided_at
FROM erasures ORDER BY id DESC LIMIT @max_rows;
