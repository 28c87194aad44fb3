-- All SQL of package fees, compiled by sqlc into package sqlcdb.

-- name: Lock :one
-- One collector rounds at a time across replicas (a session advisory lock).
SELECT pg_try_advisory_lock(hashtext(@name::text)) AS ok;

-- name: Unlock :exec
SELECT pg_advisory_unlock(hashtext(@name::text));

-- name: Cursor :one
SELECT read_to FROM psp_fee_cursors WHERE provider = @provider;

-- name: MoveCursor :exec
-- The cursor only moves forward.
INSERT INTO psp_fee_cursors (provider, read_to) VALUES (@provider, @read_to)
ON CONFLICT (provider) DO UPDATE SET read_to = greatest(psp_fee_cursors.read_to, EXCLUDED.read_to), updated_at = now();
