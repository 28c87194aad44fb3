-- All SQL of package pspruns, compiled by sqlc into package sqlcdb.
-- psp_reconciliation_runs is webhook-api's (its pspsync claims and finishes
-- the runs): it is read through psp_reconciliation_runs_for_ops and a run is
-- requested through webhook-api's function (migration 000033). Which runs
-- were alerted on is this package's own table, psp_run_alerts; a run the
-- previous release alerted on carries the view's alerted_at instead
-- (claimed_at is this release's: toRun takes it first). Every statement
-- returning a run returns Get's row.

-- name: Request :one
-- The new run's id; a unique violation of psp_reconciliation_runs_one_active
-- when one is requested or running.
SELECT request_psp_reconciliation_run(@requested_by::text)::bigint AS id;

-- name: Get :one
SELECT r.id, r.status, r.trigger, r.requested_by, r.requested_at, r.started_at, r.finished_at, r.attempts,
    r.events_found, r.events_recovered, r.events_present, r.disagreement_count, r.report, r.disagreements, r.error,
    r.alerted_at, r.disagreements_new, r.disagreements_open, r.disagreements_cleared,
    a.alerted_at AS claimed_at
FROM psp_reconciliation_runs_for_ops r LEFT JOIN psp_run_alerts a ON a.run_id = r.id
WHERE r.id = @id;

-- name: Latest :one
SELECT r.id, r.status, r.trigger, r.requested_by, r.requested_at, r.started_at, r.finished_at, r.attempts,
    r.events_found, r.events_recovered, r.events_present, r.disagreement_count, r.report, r.disagreements, r.error,
    r.alerted_at, r.disagreements_new, r.disagreements_open, r.disagreements_cleared,
    a.alerted_at AS claimed_at
FROM psp_reconciliation_runs_for_ops r LEFT JOIN psp_run_alerts a ON a.run_id = r.id
ORDER BY r.id DESC LIMIT 1;

-- name: ClaimAlert :one
-- Claims the oldest finished run with something to alert on that nobody
-- alerted on, by inserting its psp_run_alerts row: until this transaction
-- ends, another replica's claim of it waits (ON CONFLICT) and then claims
-- nothing. claimed is false when another claim won: it committed, so the
-- next look skips the run. No row: nothing to alert on.
WITH candidate AS (
    SELECT r.id FROM psp_reconciliation_runs_for_ops r
    WHERE (r.disagreements_new > 0 OR r.disagreements_cleared > 0 OR r.status = 'failed') AND r.alerted_at IS NULL
      AND r.finished_at IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM psp_run_alerts a WHERE a.run_id = r.id)
    ORDER BY r.id LIMIT 1
), claimed AS (
    INSERT INTO psp_run_alerts (run_id) SELECT id FROM candidate
    ON CONFLICT (run_id) DO NOTHING
    RETURNING run_id
)
SELECT c.id, EXISTS (SELECT 1 FROM claimed)::bool AS claimed FROM candidate c;

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
