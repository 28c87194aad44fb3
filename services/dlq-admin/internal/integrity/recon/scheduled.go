package recon

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"github.com/aegis-payments/aegis/pkg/jobs"
)

// Queue is the River queue scheduled reconciliations run in
// (jobs.LedgerCheckQueue, declared with the kind in pkg/jobs).
const Queue = jobs.LedgerCheckQueue

// ScheduledArgs is the River job of one scheduled reconciliation. Every
// dlq-admin replica inserts it every RECONCILE_INTERVAL (Schedule), unique
// per period, so N replicas run one check per interval, whichever River
// client of the schema leads.
type ScheduledArgs struct{}

// Kind names the job in river_job.kind.
func (ScheduledArgs) Kind() string { return jobs.KindLedgerCheck }

// Schedule schedules a reconciliation every interval (one per period), the
// first at a replica's start unless one ran within the current period
// already (a restart does not run it twice).
func Schedule(interval time.Duration) jobs.Schedule {
	return jobs.Schedule{Interval: interval, RunOnStart: true, Job: func() (river.JobArgs, *river.InsertOpts) {
		return ScheduledArgs{}, &river.InsertOpts{
			Queue: Queue,
			// A failed check is not retried: the next period's runs, as
			// before River (and an alert already said what failed).
			MaxAttempts: 1,
		}
	}}
}

// Worker runs scheduled reconciliations on River.
type Worker struct {
	river.WorkerDefaults[ScheduledArgs]
	r       *Reconciler
	timeout time.Duration
}

// NewWorker returns River's worker for r's scheduled checks, with the
// kind's timeout from kinds (jobs.Kinds.LedgerCheckTimeout).
func NewWorker(r *Reconciler, kinds jobs.Kinds) *Worker {
	return &Worker{r: r, timeout: kinds.WithDefaults().LedgerCheckTimeout}
}

// Timeout bounds one scheduled check, and is how long a crashed replica's
// check stays running before River rescues it, whichever client of the
// schema leads (every one states the same for the kind: pkg/jobs). A
// negative timeout would leave it running for ever. Generous (an hour by
// default): a check is a few statements, each bounded by
// RECONCILE_STATEMENT_TIMEOUT, and the next period's check runs anyway.
func (w *Worker) Timeout(*river.Job[ScheduledArgs]) time.Duration { return w.timeout }

// Work runs one scheduled check. A check already running (a manual one) is
// this period's check.
func (w *Worker) Work(ctx context.Context, _ *river.Job[ScheduledArgs]) error {
	_, err := w.r.run(ctx, TriggerScheduled, "", true)
	switch {
	case errors.Is(err, ErrBusy):
		w.r.logger.Info("scheduled reconciliation skipped: another check is running")
		return nil
	case err != nil:
		w.r.runs.WithLabelValues("error").Inc()
		w.r.logger.Error("scheduled reconciliation failed", "error", err.Error())
		return err
	}
	return nil
}
