// Package pspruns is dlq-admin's side of the PSP reconciliation: it
// requests runs (POST /v1/psp-reconciliation), reads them, and alerts on
// what they found.
//
// Why split this way. A run writes webhook_events and the outbox, which
// webhook-api owns, so webhook-api works the runs (its internal/pspsync).
// dlq-admin owns operators and alerting: it requests a run (the run's
// record, the River job that webhook-api works, jobs.PSPReconcileArgs in
// pkg/jobs, queued with an insert-only client, and its audit_log entry,
// all in one transaction: neither the record nor the job exists without
// the other) and raises the alert from the stored run, so an alert never
// depends on which service found the problem. psp_reconciliation_runs has
// one writer, webhook-api: dlq-admin records a run through webhook-api's
// function request_psp_reconciliation_run and reads runs through the view
// psp_reconciliation_runs_for_ops (migration 000033). The table admits one
// run requested or running at a time (a partial unique index): a second
// request answers 409 and queues nothing. A run whose River job will never
// work it (discarded after its last attempt) is ended as failed by the
// next request, which then goes through: without a schedule
// (PSP_RECONCILE_INTERVAL=0) nothing else would end it
// (jobs.EndOrphanedPSPRun, as webhook-api's schedule does).
//
// Alerting. Watcher looks for finished runs not yet alerted on that found
// new disagreements (one critical alert per run, key "psp_reconciliation"),
// cleared some (an info notice) or failed (an error alert, key
// "psp_reconciliation_failed"), and raises them. A run is alerted on once
// even with several dlq-admin replicas: a replica claims it by inserting
// its row in psp_run_alerts, this package's table, in the transaction that
// raises the alert; another replica's claim of the same run waits for that
// transaction and then claims nothing (INSERT ... ON CONFLICT DO NOTHING;
// a reader of a view cannot lock the run's row). A run marked alerted_at
// on the table (the previous release's mark) is not alerted on again, and
// during a rollout a claim sets that mark too, so neither release alerts
// on a run the other did.
package pspruns
