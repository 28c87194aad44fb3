package jobs_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type pingArgs struct{ N int }

func (pingArgs) Kind() string { return "ping" }

type pingWorker struct {
	river.WorkerDefaults[pingArgs]
	done chan int
}

func (w *pingWorker) Work(_ context.Context, j *river.Job[pingArgs]) error {
	w.done <- j.Args.N
	return nil
}

// A job queued by an insert-only client is worked by a Runner; Stop calls
// OnStop once, a second Stop and a Stop before Start are harmless, and no
// River goroutine outlives Stop (goleak).
func TestRunnerWorksWhatInsertOnlyQueues(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	w := &pingWorker{done: make(chan int, 1)}
	workers := river.NewWorkers()
	require.NoError(t, river.AddWorkerSafely(workers, w))
	stops := 0
	r, err := jobs.New(db.Pool, jobs.Config{Name: "test", Workers: workers,
		Queues:    map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}},
		FetchPoll: 20 * time.Millisecond, OnStop: func() { stops++ }}, lifecycle.Deps{Logger: logger})
	require.NoError(t, err)
	require.NoError(t, r.Stop(ctx), "stop before start")
	require.Zero(t, stops)

	enq, err := jobs.InsertOnly(db.Pool, logger)
	require.NoError(t, err)
	_, err = enq.Insert(ctx, pingArgs{N: 7}, nil)
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx))
	select {
	case n := <-w.done:
		require.Equal(t, 7, n)
	case <-time.After(30 * time.Second):
		t.Fatal("the job was never worked")
	}
	require.NoError(t, r.Stop(ctx))
	require.NoError(t, r.Stop(ctx), "second stop")
	require.Equal(t, 1, stops)
}

func TestConfigValidation(t *testing.T) {
	err := jobs.Config{}.Validate()
	require.ErrorContains(t, err, "Workers")
	require.ErrorContains(t, err, "Queues")
	err = jobs.Config{Kinds: jobs.Kinds{PSPRunTimeout: -time.Second}}.Validate()
	require.ErrorContains(t, err, "Kinds.PSPRunTimeout must be at least 1s")
	err = jobs.Config{Schedules: []jobs.Schedule{{Interval: time.Millisecond, Job: func() (river.JobArgs, *river.InsertOpts) {
		return pingArgs{}, nil
	}}, {Interval: time.Hour}}}.Validate()
	require.ErrorContains(t, err, "Schedules[0].Interval must be at least 1s")
	require.ErrorContains(t, err, "Schedules[1].Job is required")
}
