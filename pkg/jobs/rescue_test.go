package jobs_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// replayArgs and ledgerArgs stand for dlq-admin's kinds (replay.JobArgs,
// recon.ScheduledArgs); pspScheduledArgs for webhook-api's scheduled
// request (pspsync.ScheduledArgs). The PSP run is jobs.PSPReconcileArgs.
type replayArgs struct {
	ReplayJobID int64 `json:"replay_job_id"`
}

func (replayArgs) Kind() string { return jobs.KindReplay }

type ledgerArgs struct{}

func (ledgerArgs) Kind() string { return jobs.KindLedgerCheck }

type pspScheduledArgs struct{}

func (pspScheduledArgs) Kind() string { return jobs.KindPSPSchedule }

// kindWorker works a kind as its service's worker does, as far as River's
// rescuer can tell: the kind's timeout from jobs.Kinds, River's retry.
type kindWorker[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	timeout time.Duration
	worked  *atomic.Int64
}

func (w *kindWorker[T]) Timeout(*river.Job[T]) time.Duration { return w.timeout }

func (w *kindWorker[T]) Work(context.Context, *river.Job[T]) error {
	w.worked.Add(1)
	return nil
}

// suiteClient is one service's River client, configured as the service
// configures its own: its queues, its workers with their kinds' timeouts,
// and the suite's Kinds.
func suiteClient(t *testing.T, db *pgtest.DB, service string, kinds jobs.Kinds, worked *atomic.Int64) *jobs.Runner {
	t.Helper()
	k := kinds.WithDefaults()
	workers := river.NewWorkers()
	var queues map[string]river.QueueConfig
	switch service {
	case "dlq-admin":
		require.NoError(t, river.AddWorkerSafely(workers, &kindWorker[replayArgs]{timeout: k.ReplayTimeout, worked: worked}))
		require.NoError(t, river.AddWorkerSafely(workers, &kindWorker[ledgerArgs]{timeout: k.LedgerCheckTimeout, worked: worked}))
		queues = map[string]river.QueueConfig{jobs.ReplayQueue: {MaxWorkers: 2}, jobs.LedgerCheckQueue: {MaxWorkers: 1}}
	case "webhook-api":
		require.NoError(t, river.AddWorkerSafely(workers, &kindWorker[jobs.PSPReconcileArgs]{timeout: k.PSPRunTimeout, worked: worked}))
		require.NoError(t, river.AddWorkerSafely(workers, &kindWorker[pspScheduledArgs]{timeout: k.PSPScheduleTimeout, worked: worked}))
		queues = map[string]river.QueueConfig{jobs.PSPReconcileQueue: {MaxWorkers: 2}}
	}
	r, err := jobs.New(db.Pool, jobs.Config{Name: service + "/jobs", Workers: workers, Queues: queues, Kinds: kinds,
		FetchPoll: 50 * time.Millisecond, PollOnly: service == "webhook-api"},
		lifecycle.Deps{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return r
}

// River's rescuer runs on the schema's leader only, whichever service's
// client it is. Whichever leads, every service's jobs are rescued as their
// own service's client would: a job still running within its kind's
// timeout (a PSP run at 10 minutes of its 30, past dlq-admin's old 5-minute
// horizon) is left running, and a crashed job (attempted an hour ago, past
// its timeout, attempts left) is retried, not discarded, and worked again
// by its own service. Before every client knew every kind, the leader
// discarded the other service's jobs: a live PSP run and a crashed one when
// dlq-admin led, a crashed replay when webhook-api led.
func TestRescueJudgesEveryServicesJobsAsItsOwnWould(t *testing.T) {
	for _, leads := range []string{"dlq-admin", "webhook-api"} {
		t.Run(leads+" leads", func(t *testing.T) {
			db := pgtest.New(t)
			ctx := context.Background()
			kinds := jobs.Kinds{} // the defaults, as the services run
			enq, err := jobs.InsertOnly(db.Pool, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			// running makes a job look like one a client is working (or
			// was, before it crashed) since ago, at its first attempt.
			running := func(args river.JobArgs, opts *river.InsertOpts, ago time.Duration) int64 {
				res, err := enq.Insert(ctx, args, opts)
				require.NoError(t, err)
				_, err = db.Pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1,
					attempted_at = now() - make_interval(secs => $2), attempted_by = '{dead-client}' WHERE id = $1`,
					res.Job.ID, ago.Seconds())
				require.NoError(t, err)
				return res.Job.ID
			}
			replayOpts := &river.InsertOpts{Queue: jobs.ReplayQueue, MaxAttempts: 25}
			crashedReplay := running(replayArgs{ReplayJobID: 1}, replayOpts, time.Hour)
			liveReplay := running(replayArgs{ReplayJobID: 2}, replayOpts, 3*time.Minute)
			crashedRun := running(jobs.PSPReconcileArgs{RunID: 1}, nil, time.Hour)
			liveRun := running(jobs.PSPReconcileArgs{RunID: 2}, nil, 10*time.Minute)

			var dlqWorked, webhookWorked atomic.Int64
			worked := map[string]*atomic.Int64{"dlq-admin": &dlqWorked, "webhook-api": &webhookWorked}
			other := map[string]string{"dlq-admin": "webhook-api", "webhook-api": "dlq-admin"}[leads]
			leader := suiteClient(t, db, leads, kinds, worked[leads])
			require.NoError(t, leader.Start(ctx))
			t.Cleanup(func() { stop(t, leader) })
			require.Eventually(t, func() bool {
				var id string
				err := db.Pool.QueryRow(ctx, `SELECT leader_id FROM river_leader`).Scan(&id)
				return err == nil && id == leader.Client().ID()
			}, 30*time.Second, 10*time.Millisecond, "%s never led", leads)
			follower := suiteClient(t, db, other, kinds, worked[other])
			require.NoError(t, follower.Start(ctx))
			t.Cleanup(func() { stop(t, follower) })

			state := func(id int64) (s string, attempt int) {
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT state, attempt FROM river_job WHERE id = $1`, id).Scan(&s, &attempt))
				return s, attempt
			}
			// The crashed jobs are rescued, retried and worked by their
			// own services (a second attempt, completed).
			for _, id := range []int64{crashedReplay, crashedRun} {
				require.Eventually(t, func() bool {
					s, _ := state(id)
					return s != "running" && s != "retryable" && s != "available"
				}, 60*time.Second, 20*time.Millisecond, "crashed job %d never rescued and worked again", id)
				s, attempt := state(id)
				require.Equal(t, "completed", s, "crashed job %d: retried and worked, not discarded", id)
				require.Equal(t, 2, attempt, "crashed job %d", id)
			}
			require.Equal(t, int64(1), dlqWorked.Load(), "dlq-admin worked the rescued replay")
			require.Equal(t, int64(1), webhookWorked.Load(), "webhook-api worked the rescued run")
			// The rescuer has looked at every stuck job by now (one pass):
			// the live ones, within their kinds' timeouts, are left alone.
			for _, id := range []int64{liveReplay, liveRun} {
				s, attempt := state(id)
				require.Equal(t, "running", s, "job %d, within its timeout, is still being worked", id)
				require.Equal(t, 1, attempt, "job %d", id)
			}
		})
	}
}

// A client gets a stand-in for every kind of a queue it does not work
// (here dlq-admin's: the PSP run and its schedule), none for its own.
func TestNewRegistersStandInsForOtherServicesKinds(t *testing.T) {
	db := pgtest.New(t)
	var worked atomic.Int64
	workers := river.NewWorkers()
	require.NoError(t, river.AddWorkerSafely(workers, &kindWorker[replayArgs]{timeout: time.Minute, worked: &worked}))
	_, err := jobs.New(db.Pool, jobs.Config{Name: "dlq-admin/jobs", Workers: workers,
		Queues: map[string]river.QueueConfig{jobs.ReplayQueue: {MaxWorkers: 1}}},
		lifecycle.Deps{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.ErrorContains(t, river.AddWorkerSafely(workers, &kindWorker[jobs.PSPReconcileArgs]{worked: &worked}), "already registered")
	require.ErrorContains(t, river.AddWorkerSafely(workers, &kindWorker[pspScheduledArgs]{worked: &worked}), "already registered")
	require.ErrorContains(t, river.AddWorkerSafely(workers, &kindWorker[ledgerArgs]{worked: &worked}), "already registered")

	// A service's own kind in a queue it works is its own worker's.
	mine := river.NewWorkers()
	_, err = jobs.New(db.Pool, jobs.Config{Name: "webhook-api/jobs", Workers: mine,
		Queues: map[string]river.QueueConfig{jobs.PSPReconcileQueue: {MaxWorkers: 1}}},
		lifecycle.Deps{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, river.AddWorkerSafely(mine, &kindWorker[jobs.PSPReconcileArgs]{worked: &worked}))
}
