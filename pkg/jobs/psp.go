package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/aegis-payments/aegis/pkg/jobs/sqlcdb"
)

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
// dlq-admin (POST /v1/psp-reconciliation, through webhook-api's function
// request_psp_reconciliation_run) and webhook-api's schedule record the run
// and insert its job in one transaction; webhook-api works it.
type PSPReconcileArgs struct {
	RunID int64 `json:"run_id"`
}

// Kind names the job in river_job.kind.
func (PSPReconcileArgs) Kind() string { return KindPSPRun }

// InsertOpts puts the job in PSPReconcileQueue, one River job per run.
func (PSPReconcileArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: PSPReconcileQueue, MaxAttempts: PSPReconcileMaxAttempts,
		UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// EndOrphanedPSPRun ends, as failed with why, the requested or running
// psp_reconciliation_runs row whose River job will never work it
// (discarded after its last attempt, or cancelled), and returns its id;
// ok is false when there was none (at most one run is active). Such a run
// would refuse every later one, so both ways of requesting a run call it
// first: dlq-admin's request, in the transaction that requests the new
// run, and webhook-api's schedule.
//
// River's jobs are read through River's client (JobListTx), never by SQL
// on its tables, and only the active run's own job is asked for, so no
// number of other jobs of the kind can hide it. The active run is read
// first: a run and its job commit together, so its job is visible to the
// job list that follows. The run is ended by webhook-api's function
// end_orphaned_psp_run (migration 000033: the table has one writer), which
// ends only a run still requested or running; whether its job is gone is
// River's to say, so it is asked here, in the same transaction.
func EndOrphanedPSPRun(ctx context.Context, tx pgx.Tx, why string) (id int64, ok bool, err error) {
	q := sqlcdb.New(tx)
	run, err := q.ActivePSPRun(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("end an orphaned psp reconciliation run: read the active run: %w", err)
	}
	live, err := runHasLiveJob(ctx, tx, run)
	if err != nil || live {
		return 0, false, err
	}
	id, err = q.EndPSPRun(ctx, sqlcdb.EndPSPRunParams{Error: why, ID: run})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil // it finished meanwhile
	}
	if err != nil {
		return 0, false, fmt.Errorf("end orphaned psp reconciliation run %d: %w", run, err)
	}
	return id, true, nil
}

// runHasLiveJob reports whether run's River job will still be worked.
func runHasLiveJob(ctx context.Context, tx pgx.Tx, run int64) (bool, error) {
	live, err := HasLiveJob(ctx, tx, PSPReconcileArgs{}.Kind(), "run_id", run)
	if err != nil {
		return false, fmt.Errorf("psp reconciliation run %d: %w", run, err)
	}
	return live, nil
}
