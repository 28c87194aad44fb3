-- All SQL of package pspruns on psp_reconciliation_runs (webhook-api's
-- pspsync claims and finishes the runs), compiled by sqlc into package
-- sqlcdb. Every statement returning a run returns the same columns (Get's
-- row: toRun converts the others to it).

-- name: Request :one
INSERT INTO psp_reconciliation_runs (trigger, requested_by) VALUES ('manual', @requested_by::text)
RETURNING id, status, trigger, requested_by, requested_at, started_at, finished_at, attempts,
    events_found, events_recovered, events_present, disagreement_count, report, disagreements, error, alerted_at,
    disagreements_new, disagreements_open, disagreements_cleared;

-- name: Get :one
SELECT id, status, trigger, requested_by, requested_at, started_at, finished_at, attempts,
    events_found, events_recovered, events_present, disagreement_count, report, disagreements, error, alerted_at,
    disagreements_new, disagreements_open, disagreements_cleared
FROM psp_reconciliation_runs WHERE id = @id;

-- name: Latest :one
SELECT id, status, trigger, requested_by, requested_at, started_at, finished_at, attempts,
    events_found, events_recovered, events_present, disagreement_count, report, disagreements, error, alerted_at,
    disagreements_new, disagreements_open, disagreements_cleared
FROM psp_reconciliation_runs ORDER BY id DESC LIMIT 1;

-- name: Unalerted :one
-- The oldest finished run with something to alert on, locked: replicas do
-- not alert on it twice.
SELECT id, status, trigger, requested_by, requested_at, started_at, finished_at, attempts,
    events_found, events_recovered, events_present, disagreement_count, report, disagreements, error, alerted_at,
    disagreements_new, disagreements_open, disagreements_cleared
FROM psp_reconciliation_runs
WHERE (disagreements_new > 0 OR disagreements_cleared > 0 OR status = 'failed') AND alerted_at IS NULL AND finished_at IS NOT NULL
ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED;

-- name: MarkAlerted :exec
UPDATE psp_reconciliation_runs SET alerted_at = now() WHERE id = @id;

-- name: OpenDisagreements :many
-- Every disagreement open now, oldest first.
SELECT provider, kind, coalesce(payout_id, '')::text AS payout_id, coalesce(psp_object_id, '')::text AS psp_object_id,
    coalesce(psp_status, '')::text AS psp_status, coalesce(ledger_status, '')::text AS ledger_status, detail,
    first_seen_run, first_seen_at, last_seen_run, last_seen_at
FROM psp_disagreements_for_ops WHERE cleared_at IS NULL ORDER BY first_seen_at, id LIMIT @max_rows;

-- name: ClearedDisagreements :many
-- What run @run_id found gone.
SELECT provider, kind, coalesce(payout_id, '')::text AS payout_id, coalesce(psp_object_id, '')::text AS psp_object_id,
    coalesce(psp_status, '')::text AS psp_status, coalesce(ledger_status, '')::text AS ledger_status, detail,
    first_seen_run, first_seen_at, last_seen_run, last_seen_at
FROM psp_disagreements_for_ops WHERE cleared_run = @run_id::bigint ORDER BY id LIMIT @max_rows;
