-- The psp_reconciliation_runs statements the River job kinds declared here
-- need, compiled by sqlc into ./sqlcdb. Both webhook-api and dlq-admin run
-- them: runs are read through psp_reconciliation_runs_for_ops and ended
-- through webhook-api's function (migration 000033). River's own tables are
-- never queried here: River's client reads them (psp.go).

-- name: ActivePSPRun :one
-- At most one run is active (psp_reconciliation_runs_one_active).
SELECT id FROM psp_reconciliation_runs_for_ops WHERE status IN ('requested', 'running') ORDER BY id LIMIT 1;

-- name: EndPSPRun :one
-- The run's id; no row when it is no longer requested or running.
SELECT e.id::bigint AS id FROM (SELECT end_orphaned_psp_run(@id::bigint, @error::text) AS id) e WHERE e.id IS NOT NULL;
