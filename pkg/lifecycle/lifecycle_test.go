package lifecycle_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/lifecycle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// worker counts the items it finished and the ones it abandoned: one item
// in flight that takes `work` unless the hard context ends it.
type worker struct {
	lifecycle.Base
	work      time.Duration
	finished  atomic.Int32
	abandoned atomic.Int32
	runs      atomic.Int32
}

func (w *worker) Start(ctx context.Context) error {
	return w.Base.Start(ctx, func(soft, hard context.Context) error {
		w.runs.Add(1)
		select {
		case <-time.After(w.work):
			w.finished.Add(1)
		case <-hard.Done():
			w.abandoned.Add(1)
		}
		<-soft.Done()
		return nil
	})
}

func TestStopIsHarmlessBeforeStartAndTwice(t *testing.T) {
	t.Parallel()
	w := &worker{}
	require.NoError(t, w.Stop(context.Background()), "stop before start")
	require.NoError(t, w.Start(context.Background()))
	require.NoError(t, w.Start(context.Background()), "second start does nothing")
	require.NoError(t, w.Stop(context.Background()))
	require.NoError(t, w.Stop(context.Background()), "second stop")
	require.NoError(t, w.Start(context.Background()), "start after stop does nothing")
	require.Equal(t, int32(1), w.runs.Load())
	select {
	case <-w.Done():
	default:
		t.Fatal("the goroutine outlived Stop")
	}
}

// Stop lets in-flight work finish when the context allows it.
func TestSoftStopFinishesInFlightWork(t *testing.T) {
	t.Parallel()
	w := &worker{work: 50 * time.Millisecond}
	require.NoError(t, w.Start(context.Background()))
	require.NoError(t, w.Stop(context.Background()))
	require.Equal(t, int32(1), w.finished.Load())
	require.Zero(t, w.abandoned.Load())
}

// When the stop context runs out, in-flight work is cancelled, Stop returns
// within the bound, says so, and the goroutine has returned.
func TestHardStopIsBoundedByTheContext(t *testing.T) {
	t.Parallel()
	w := &worker{work: time.Hour}
	require.NoError(t, w.Start(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := w.Stop(ctx) // returns, though the work would take an hour
	require.ErrorIs(t, err, lifecycle.ErrHardStop)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, int32(1), w.abandoned.Load())
	require.NoError(t, w.Stop(context.Background()), "second stop after a hard one")
}

// The start context's cancellation does not stop a component: only Stop
// does, so that a service stops its parts in order.
func TestStartContextDoesNotStop(t *testing.T) {
	t.Parallel()
	w := &worker{}
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, w.Start(ctx))
	cancel()
	select {
	case <-w.Done():
		t.Fatal("cancelling the start context stopped the component")
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, w.Stop(context.Background()))
}

func TestHookRunsOnceAndOnlyAfterStart(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	h := lifecycle.OnStop("flush", func(context.Context) error { n.Add(1); return errors.New("broker gone") })
	require.NoError(t, h.Stop(context.Background()))
	require.Zero(t, n.Load(), "not started: nothing to do")
	require.NoError(t, h.Start(context.Background()))
	require.ErrorContains(t, h.Stop(context.Background()), "flush: broker gone")
	require.NoError(t, h.Stop(context.Background()))
	require.Equal(t, int32(1), n.Load())
}

// recorder is a component that notes when it starts and stops.
type recorder struct {
	name string
	log  *[]string
	mu   *sync.Mutex
}

func (r recorder) note(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, what+" "+r.name)
}
func (r recorder) Start(context.Context) error { r.note("start"); return nil }
func (r recorder) Stop(context.Context) error  { r.note("stop"); return nil }

// Run starts the stages last first and stops them first first, on ctx.
func TestRunStopsStagesInOrder(t *testing.T) {
	t.Parallel()
	var log []string
	var mu sync.Mutex
	rec := func(n string) lifecycle.Component { return recorder{name: n, log: &log, mu: &mu} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- lifecycle.Run(ctx, slog.New(slog.DiscardHandler), time.Second,
			lifecycle.Stage{Name: "intake", Components: []lifecycle.Component{rec("http")}},
			lifecycle.Stage{Name: "drain", Components: []lifecycle.Component{rec("committer")}},
			lifecycle.Stage{Name: "flush", Components: []lifecycle.Component{rec("notifier")}},
		)
	}()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(log) == 3 }, time.Second, time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	require.Equal(t, []string{"start notifier", "start committer", "start http",
		"stop http", "stop committer", "stop notifier"}, log)
}

// A component failing stops the whole service, and Run returns its error.
func TestRunStopsOnAFailure(t *testing.T) {
	t.Parallel()
	w := &worker{}
	failing := lifecycle.Func("consumer", func(context.Context) error { return errors.New("client closed") })
	err := lifecycle.Run(context.Background(), slog.New(slog.DiscardHandler), time.Second,
		lifecycle.Stage{Name: "intake", Components: []lifecycle.Component{failing, w}})
	require.ErrorContains(t, err, "consumer: client closed")
	select {
	case <-w.Done():
	default:
		t.Fatal("the other component was not stopped")
	}
}

// The whole shutdown fits in grace: a stage that does not finish in time is
// hard-stopped, and the later stages still run their stop.
func TestRunShutdownIsBoundedByGrace(t *testing.T) {
	t.Parallel()
	slow := &worker{work: time.Hour}
	var flushed atomic.Bool
	flush := lifecycle.OnStop("flush", func(context.Context) error { flushed.Store(true); return nil })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := lifecycle.Run(ctx, slog.New(slog.DiscardHandler), 200*time.Millisecond, // returns, though drain would take an hour
		lifecycle.Stage{Name: "drain", Components: []lifecycle.Component{slow}},
		lifecycle.Stage{Name: "flush", Components: []lifecycle.Component{flush}})
	require.ErrorIs(t, err, lifecycle.ErrHardStop)
	require.ErrorContains(t, err, "stop drain")
	require.True(t, flushed.Load())
	require.Equal(t, int32(1), slow.abandoned.Load())
}

// A Loop's error after Stop (a listener that failed to shut down cleanly)
// is Stop's error, not lost.
func TestLoopErrorDuringStopIsReturned(t *testing.T) {
	t.Parallel()
	l := lifecycle.Func("http", func(ctx context.Context) error {
		<-ctx.Done()
		return errors.New("shutdown: connections still open")
	})
	require.NoError(t, l.Start(context.Background()))
	require.ErrorContains(t, l.Stop(context.Background()), "http: shutdown: connections still open")
}
