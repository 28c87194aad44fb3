package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
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

// sqlEndOrphanedPSPRun ends the active run that no live River job will
// work. A run whose job is not yet committed beside it is invisible here
// too, so it is left alone.
const sqlEndOrphanedPSPRun = `
UPDATE psp_reconciliation_runs r SET status = 'failed', finished_at = now(), locked_by = NULL, lease_until = NULL,
    error = $1::text
WHERE r.status IN ('requested', 'running')
  AND NOT EXISTS (SELECT 1 FROM river_job j WHERE j.kind = $2::text AND j.args->>'run_id' = r.id::text
      AND j.state::text = ANY($3::text[]))
RETURNING r.id`

// liveJobStates are a River job's states in which it will still be worked.
func liveJobStates() []string {
	return []string{string(rivertype.JobStateAvailable), string(rivertype.JobStatePending),
		string(rivertype.JobStateRetryable), string(rivertype.JobStateRunning), string(rivertype.JobStateScheduled)}
}

// Querier runs a statement: a pool, a connection or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// EndOrphanedPSPRun ends, as failed with why, the requested or running
// psp_reconciliation_runs row whose River job will never work it
// (discarded after its last attempt, or cancelled), and returns its id;
// ok is false when there was none (at most one run is active). Such a run
// would refuse every later one, so both ways of requesting a run call it
// first: dlq-admin's request, in the transaction that inserts the new run,
// and webhook-api's schedule.
func EndOrphanedPSPRun(ctx context.Context, db Querier, why string) (id int64, ok bool, err error) {
	err = db.QueryRow(ctx, sqlEndOrphanedPSPRun, why, PSPReconcileArgs{}.Kind(), liveJobStates()).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("end an orphaned psp reconciliation run: %w", err)
	}
	return id, true, nil
}
