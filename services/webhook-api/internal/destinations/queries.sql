-- All SQL of package destinations, compiled by sqlc into package sqlcdb.
-- Every statement returns the whole row (sqlcdb.Destination).

-- name: Register :one
-- Inserts a registration unless an active one exists; Active then finds it.
-- ON CONFLICT names the partial index's columns and predicate.
INSERT INTO destinations (id, user_id, provider, destination, type, created_by, external_account, currency,
                          psp_checked_at, psp_record)
VALUES (@id, @user_id, @provider, @destination, @type, @created_by, sqlc.narg(external_account), sqlc.narg(currency),
        sqlc.narg(psp_checked_at), sqlc.narg(psp_record))
ON CONFLICT (user_id, provider, destination) WHERE status = 'active' DO NOTHING
RETURNING id, user_id, provider, destination, type, status, created_by, created_at, disabled_by, disabled_at,
       external_account, currency, psp_checked_at, psp_record, disabled_reason;

-- name: Active :one
SELECT id, user_id, provider, destination, type, status, created_by, created_at, disabled_by, disabled_at,
       external_account, currency, psp_checked_at, psp_record, disabled_reason
FROM destinations
WHERE user_id = @user_id AND provider = @provider AND destination = @destination AND status = 'active';

-- name: List :many
-- An empty status lists every status.
SELECT id, user_id, provider, destination, type, status, created_by, created_at, disabled_by, disabled_at,
       external_account, currency, psp_checked_at, psp_record, disabled_reason
FROM destinations
WHERE user_id = @user_id AND (@status::text = '' OR status = @status)
ORDER BY created_at DESC, id DESC;

-- name: Disable :one
UPDATE destinations SET status = 'disabled', disabled_by = @disabled_by::text, disabled_at = now()
WHERE id = @id AND user_id = @user_id AND status = 'active'
RETURNING id, user_id, provider, destination, type, status, created_by, created_at, disabled_by, disabled_at,
       external_account, currency, psp_checked_at, psp_record, disabled_reason;

-- name: Get :one
SELECT id, user_id, provider, destination, type, status, created_by, created_at, disabled_by, disabled_at,
       external_account, currency, psp_checked_at, psp_record, disabled_reason
FROM destinations
WHERE id = @id AND user_id = @user_id;

-- name: Resolve :one
-- Finds the active destination a payout names, by id (NULL: any), by value
-- ('' : any) or both (then they must agree), and holds it (FOR SHARE) until
-- the payout commits: a concurrent disable waits, and then no longer
-- disables a destination a payout was accepted for in between.
SELECT id, destination, currency FROM destinations
WHERE user_id = @user_id AND provider = @provider AND status = 'active'
  AND (sqlc.narg(id)::uuid IS NULL OR id = sqlc.narg(id)) AND (@value::text = '' OR destination = @value)
ORDER BY created_at DESC
LIMIT 1
FOR SHARE;
