// Package pspruns is dlq-admin's side of the PSP reconciliation: it
// requests runs (POST /v1/psp-reconciliation), reads them, and alerts on
// what they found.
//
// Why split this way. A run writes webhook_events and the outbox, which
// webhook-api owns, so webhook-api works the runs (its internal/pspsync).
// dlq-admin owns operators and alerting: it requests a run (one row
// in psp_reconciliation_runs, the River job that webhook-api works,
// jobs.PSPReconcileArgs in pkg/jobs, queued with an insert-only River
// client, and its audit_log entry, all in one transaction: neither the
// record nor the job exists without the other) and raises the alert from
// the stored run, so an alert never depends on which service found the
// problem. The table admits one run requested or running at a time (a
// partial unique index): a second request answers 409 and queues nothing.
// A run whose River job will never work it (discarded after its last
// attempt) is ended as failed by the next request, which then goes
// through: without a schedule (PSP_RECONCILE_INTERVAL=0) nothing else would
// end it (jobs.EndOrphanedPSPRun, as webhook-api's schedule does).
//
// Alerting. Watcher looks for finished runs not yet alerted on that found
// disagreements (one critical alert per run, key "psp_reconciliation") or
// failed (an error alert, key "psp_reconciliation_failed"), raises it, and
// marks the run alerted in the same step; a run is alerted on once even
// with several dlq-admin replicas (the row is locked while it is handled).
package pspruns
