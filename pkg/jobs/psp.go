package jobs

import "github.com/riverqueue/river"

// PSPReconcileQueue is the River queue PSP reconciliation runs are worked
// in (by webhook-api, which owns the tables a run writes).
const PSPReconcileQueue = "psp_reconcile"

// PSPReconcileMaxAttempts bounds River's retries of one run: attempts are
// spent by errors storing its report and by crashes River rescues (a
// failed PSP call ends the run as failed, without a retry; shutdown snoozes
// it and spends none). The last attempt that errs ends the run as failed,
// so a run never stays active for ever.
const PSPReconcileMaxAttempts = 10

// PSPReconcileArgs is the River job that works the psp_reconciliation_runs
// row RunID. The row is the operator's record of the run (status, counts,
// window, disagreements); the River job is its lease, retries and rescue.
// dlq-admin (POST /v1/psp-reconciliation) and webhook-api's schedule insert
// both in one transaction; webhook-api works it.
type PSPReconcileArgs struct {
	RunID int64 `json:"run_id"`
}

// Kind names the job in river_job.kind.
func (PSPReconcileArgs) Kind() string { return "psp_reconcile" }

// InsertOpts puts the job in PSPReconcileQueue, one River job per run.
func (PSPReconcileArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: PSPReconcileQueue, MaxAttempts: PSPReconcileMaxAttempts,
		UniqueOpts: river.UniqueOpts{ByArgs: true}}
}
