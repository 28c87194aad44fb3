-- All SQL of package pspruns on psp_reconciliation_runs (webhook-api's
-- pspsync claims and finishes the runs), compiled by sqlc into package
-- sqlcdb. Every statement returning a run returns the same columns (Get's
-- row: toRun converts the others to it).

-- name: Request :one
INSERT INTO psp_reconciliation_runs (trigger, requested_by) VALUES ('manual', @requested_by::text)
RETURNING id, status, trigger, requested_by, requested_at, started_at, finished_at, attempts,
    events_found, events_recovered, events_present, disagreement_count, report, disagreements, error, alerted_at;

-- name: Get :one
SELECT id, status, trigger, requested_by, requested_at, started_at, finished_at, attempts,
    events_found, events_recovered, events_present, disagreement_count, report, disagreements, error, alerted_at
FROM psp_reconciliation_runs WHERE id = @id;

-- name: Latest :one
SELECT id, status, trigger, requested_by, requested_at, started_at, finished_at, attempts,
    events_found, events_recovered, events_present, disagreement_count, report, disagreements, error, alerted_at
FROM psp_reconciliation_runs ORDER BY id DESC LIMIT 1;

-- name: Unalerted :one
-- The oldest finished run with something to alert on, locked: replicas do
-- not alert on it twice.
SELECT id, status, trigger, requested_by, requested_at, started_at, finished_at, attempts,
    events_found, events_recovered, events_present, disagreement_count, report, disagreements, error, alerted_at
FROM psp_reconciliation_runs
WHERE (disagreement_count > 0 OR status = 'failed') AND alerted_at IS NULL AND finished_at IS NOT NULL
ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED;

-- name: MarkAlerted :exec
UPDATE psp_reconciliation_runs SET alerted_at = now() WHERE id = @id;
