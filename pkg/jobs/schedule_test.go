package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// ledgerCheckArgs and pspScheduleArgs stand for the two services'
// scheduled jobs: dlq-admin's ledger integrity check (queue "reconcile",
// one attempt) and webhook-api's scheduled PSP reconciliation (queue
// "psp_reconcile", three attempts, a client that polls).
type ledgerCheckArgs struct{}

func (ledgerCheckArgs) Kind() string { return "test_ledger_check" }

type pspScheduleArgs struct{}

func (pspScheduleArgs) Kind() string { return "test_psp_scheduled" }

// countingWorker counts the jobs it worked.
type countingWorker[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	worked *atomic.Int64
}

func (w *countingWorker[T]) Work(context.Context, *river.Job[T]) error {
	w.worked.Add(1)
	return nil
}

// service is one service's River client, configured as the service
// configures its own: its worker, its queue, its schedule.
type service struct {
	name     string
	queue    string
	attempts int
	pollOnly bool
	args     river.JobArgs
	addTo    func(*river.Workers, *atomic.Int64) error
	worked   atomic.Int64
}

func ledgerService() *service {
	return &service{name: "dlq-admin/jobs", queue: "reconcile", attempts: 1, args: ledgerCheckArgs{},
		addTo: func(w *river.Workers, n *atomic.Int64) error {
			return river.AddWorkerSafely(w, &countingWorker[ledgerCheckArgs]{worked: n})
		}}
}

func pspService() *service {
	return &service{name: "psp-reconcile", queue: "psp_reconcile", attempts: 3, pollOnly: true, args: pspScheduleArgs{},
		addTo: func(w *river.Workers, n *atomic.Int64) error {
			return river.AddWorkerSafely(w, &countingWorker[pspScheduleArgs]{worked: n})
		}}
}

// schedule is s's job every interval, the first at start, as the services
// declare theirs.
func (s *service) schedule(interval time.Duration) []jobs.Schedule {
	return []jobs.Schedule{{Interval: interval, RunOnStart: true, Job: func() (river.JobArgs, *river.InsertOpts) {
		return s.args, &river.InsertOpts{Queue: s.queue, MaxAttempts: s.attempts}
	}}}
}

func (s *service) runner(t *testing.T, db *pgtest.DB, interval time.Duration) *jobs.Runner {
	t.Helper()
	workers := river.NewWorkers()
	require.NoError(t, s.addTo(workers, &s.worked))
	r, err := jobs.New(db.Pool, jobs.Config{Name: s.name, Workers: workers,
		Queues:    map[string]river.QueueConfig{s.queue: {MaxWorkers: 1}},
		Schedules: s.schedule(interval),
		FetchPoll: 50 * time.Millisecond, PollOnly: s.pollOnly},
		lifecycle.Deps{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return r
}

// stop stops r within a bound.
func stop(t *testing.T, r *jobs.Runner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, r.Stop(ctx))
}

// Both services' clients share one River schema, where River elects one
// leader. Each service's schedule must run whichever of them leads: the
// ledger check and the PSP reconciliation are both inserted and worked
// every period, with two replicas of each service, and each period gets
// one job of each kind however many replicas insert it.
func TestSchedulesRunWhicheverServiceLeads(t *testing.T) {
	for _, leads := range []string{"dlq-admin leads", "webhook-api leads"} {
		t.Run(leads, func(t *testing.T) {
			db := pgtest.New(t)
			ctx := context.Background()
			const interval = time.Second
			ledger, psp := ledgerService(), pspService()
			first, second := ledger, psp
			if leads == "webhook-api leads" {
				first, second = psp, ledger
			}
			began := time.Now()
			leader := first.runner(t, db, interval)
			require.NoError(t, leader.Start(ctx))
			require.Eventually(t, func() bool {
				var id string
				err := db.Pool.QueryRow(ctx, `SELECT leader_id FROM river_leader`).Scan(&id)
				return err == nil && id == leader.Client().ID()
			}, 30*time.Second, 10*time.Millisecond, "the first client never led")
			runners := []*jobs.Runner{leader}
			for _, s := range []*service{second, first, second} {
				r := s.runner(t, db, interval)
				require.NoError(t, r.Start(ctx))
				runners = append(runners, r)
			}
			if !assert.Eventually(t, func() bool { return ledger.worked.Load() >= 3 && psp.worked.Load() >= 3 },
				30*time.Second, 20*time.Millisecond) {
				t.Fatalf("a service's schedule did not run: %d ledger checks, %d psp reconciliations worked",
					ledger.worked.Load(), psp.worked.Load())
			}
			for _, r := range runners {
				stop(t, r)
			}
			periods := int(time.Since(began)/interval) + 2
			for _, s := range []*service{ledger, psp} {
				var jobsInserted int
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1`, s.args.Kind()).Scan(&jobsInserted))
				require.LessOrEqual(t, jobsInserted, periods, fmt.Sprintf("%s: one job per period, not one per replica", s.name))
			}
		})
	}
}
