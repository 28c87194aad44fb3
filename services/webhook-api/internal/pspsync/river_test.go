package pspsync_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/pspsync"
)

// hangingSource is a PSP that never answers until the run is cancelled;
// started is told when it is asked.
type hangingSource struct {
	pspsync.Source
	started chan struct{}
}

func (h hangingSource) Events(ctx context.Context, _ time.Time) ([]pspsync.Pulled, error) {
	select {
	case h.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// The schedule is a jobs.Schedule: with two clients (two replicas), both
// insert the scheduled job, one scheduled run is requested for the period,
// and the run is worked once. Its job is unique per period, so a second
// insert of it in the same period (a restart, another replica) is skipped.
func TestScheduleRequestsOneRunPerPeriodWithTwoClients(t *testing.T) {
	e := newBareEnv(t, pspsync.Config{Window: time.Hour, Grace: time.Hour})
	e.psp.Pay(t, "stripe", "alice", 1000, "usd")
	var runners []*jobs.Runner
	for range 2 {
		r, _ := e.startRunner(e.rec, pspsync.RunnerConfig{Interval: time.Hour})
		runners = append(runners, r)
	}
	var id int64
	require.Eventually(t, func() bool {
		return e.db.Pool.QueryRow(context.Background(), `SELECT id FROM psp_reconciliation_runs WHERE trigger = 'scheduled'`).Scan(&id) == nil
	}, 60*time.Second, 20*time.Millisecond, "no scheduled run")
	e.finished(id)
	// Stopped, both clients' leaders, enqueuers and workers are done: every
	// run and job they were going to make is in the tables now.
	for _, r := range runners {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, r.Stop(stopCtx))
		cancel()
	}
	require.Equal(t, 1, e.count(`SELECT count(*) FROM psp_reconciliation_runs`))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM river_job WHERE kind = 'psp_reconcile_scheduled'`))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM river_job WHERE kind = 'psp_reconcile'`))
	r := e.read(id)
	require.Equal(t, 1, r.Recovered)
	require.Equal(t, 1, e.count(`SELECT attempts FROM psp_reconciliation_runs WHERE id = $1`, id))

	args, opts := pspsync.Schedule(time.Hour).Args()
	res, err := e.enq.Insert(context.Background(), args, opts)
	require.NoError(t, err)
	require.True(t, res.UniqueSkippedAsDuplicate, "one scheduled job per period")
}

// A worker stopped mid-run (its context cancelled for shutdown) hands the
// run back and snoozes its job; the next client finishes it, once.
func TestRunInterruptedByShutdownIsFinishedByTheNextClient(t *testing.T) {
	e := newBareEnv(t, pspsync.Config{Window: time.Hour, Grace: time.Hour})
	e.psp.Pay(t, "stripe", "bob", 1100, "usd")
	hang := hangingSource{Source: pspsync.NewStripe(stripeapi.New(stripeKey, e.psp.URL, nil)), started: make(chan struct{}, 1)}
	stuck := pspsync.NewReconciler(pspsync.Config{Window: time.Hour, Grace: time.Hour}, e.runs, e.store,
		[]pspsync.Source{hang}, lifecycle.Deps{})
	first, _ := e.startRunner(stuck, pspsync.RunnerConfig{})
	ctx := context.Background()
	id := e.request(ctx)
	select {
	case <-hang.started:
	case <-time.After(60 * time.Second):
		t.Fatal("the run never asked the PSP")
	}
	require.Equal(t, 1, e.count(`SELECT count(*) FROM psp_reconciliation_runs WHERE id = $1 AND status = 'running'`, id))
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, first.Stop(stopCtx), "stops at once, without waiting for the PSP")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM psp_reconciliation_runs WHERE id = $1 AND status = 'requested'
		AND locked_by IS NULL AND finished_at IS NULL`, id), "handed back")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM river_job WHERE kind = 'psp_reconcile' AND state IN ('available', 'scheduled')`),
		"snoozed for the next client")

	e.startRunner(e.rec, pspsync.RunnerConfig{})
	e.finished(id)
	r := e.read(id)
	require.Equal(t, 1, r.Recovered)
	require.Equal(t, 2, e.count(`SELECT attempts FROM psp_reconciliation_runs WHERE id = $1`, id))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM webhook_events WHERE provider = 'stripe'`))
}

// A worker that died mid-run (its process gone: River's job left running,
// the run held by its token) is rescued by River: another client takes the
// run over under a new token and finishes it once; the dead attempt's
// report, were it still alive, is refused.
func TestCrashedWorkersRunIsRescuedAndFinishedOnce(t *testing.T) {
	e := newBareEnv(t, pspsync.Config{Window: time.Hour, Grace: time.Hour})
	e.psp.Pay(t, "stripe", "carol", 1200, "usd")
	ctx := context.Background()
	id := e.request(ctx)
	// The dead worker had started it and stored one of its events.
	_, err := e.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - interval '1 hour',
		attempted_by = '{dead-client}' WHERE kind = 'psp_reconcile'`)
	require.NoError(t, err)
	_, err = e.db.Pool.Exec(ctx, `UPDATE psp_reconciliation_runs SET status = 'running', started_at = now(),
		locked_by = 'river-1-1-dead', attempts = 1 WHERE id = $1`, id)
	require.NoError(t, err)

	e.startRunner(e.rec, pspsync.RunnerConfig{Kinds: jobs.Kinds{PSPRunTimeout: 5 * time.Second}})
	e.finished(id)
	r := e.read(id)
	require.Equal(t, 1, r.Recovered)
	require.Equal(t, 2, e.count(`SELECT attempts FROM psp_reconciliation_runs WHERE id = $1`, id))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM webhook_events WHERE provider = 'stripe'`))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM river_job WHERE kind = 'psp_reconcile' AND state = 'completed' AND attempt = 2`))

	err = e.runs.Finish(ctx, id, "river-1-1-dead", pspsync.Report{}, nil)
	require.ErrorIs(t, err, pspsync.ErrNotHeld, "the dead attempt cannot finish it again")
	r2 := e.read(id)
	require.Equal(t, r.Recovered, r2.Recovered, "the report stands")
}

// A run whose River job is gone (discarded after its attempts) would block
// every later run; the schedule ends it as failed and requests the next.
func TestScheduleEndsARunWhoseJobIsGone(t *testing.T) {
	e := newBareEnv(t, pspsync.Config{Window: time.Hour, Grace: time.Hour})
	ctx := context.Background()
	orphan := e.request(ctx)
	_, err := e.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'discarded', finalized_at = now() WHERE kind = 'psp_reconcile'`)
	require.NoError(t, err)
	e.startRunner(e.rec, pspsync.RunnerConfig{Interval: time.Hour})
	var next int64
	require.Eventually(t, func() bool {
		return e.db.Pool.QueryRow(ctx, `SELECT id FROM psp_reconciliation_runs WHERE trigger = 'scheduled'`).Scan(&next) == nil
	}, 60*time.Second, 20*time.Millisecond, "no scheduled run")
	e.finished(next)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM psp_reconciliation_runs WHERE id = $1 AND status = 'failed'
		AND error LIKE '%River job%'`, orphan))
}
