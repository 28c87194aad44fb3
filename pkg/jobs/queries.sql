-- The psp_reconciliation_runs statements the River job kinds declared here
-- need. sqlc compiles this into ./sqlcdb. River's own tables are never
-- queried here: River's client reads them (psp.go).

-- name: ActivePSPRun :one
-- At most one run is active (psp_reconciliation_runs_one_active).
SELECT id FROM psp_reconciliation_runs WHERE status IN ('requested', 'running') ORDER BY id LIMIT 1;

-- name: EndPSPRun :one
UPDATE psp_reconciliation_runs SET status = 'failed', finished_at = now(), locked_by = NULL, lease_until = NULL,
    error = @error::text
WHERE id = @id AND status IN ('requested', 'running')
RETURNING id;
