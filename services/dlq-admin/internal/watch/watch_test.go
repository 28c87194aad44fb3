package watch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/watch"
)

// The tasks run at once in order, a wake runs its task again at once, a
// failed run is reported, and Run returns when ctx ends.
func TestRunStartsWakesReportsAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := make(chan string, 10)
	failed := make(chan error, 10)
	wake := make(chan struct{})
	boom := errors.New("postgres is down")
	done := make(chan error, 1)
	go func() {
		done <- watch.Run(ctx,
			watch.Task{Every: time.Hour, Wake: wake, Do: func(context.Context) error { ran <- "sweep"; return nil }},
			watch.Task{Every: time.Hour, Do: func(context.Context) error { ran <- "check"; return boom },
				Failed: func(err error) { failed <- err }},
		)
	}()
	require.Equal(t, "sweep", <-ran, "first task first")
	require.Equal(t, "check", <-ran)
	require.ErrorIs(t, <-failed, boom, "a failed run is reported")
	wake <- struct{}{}
	require.Equal(t, "sweep", <-ran, "a wake runs its task, long before its hour")
	cancel()
	require.NoError(t, <-done)
}

// A run cut short by ctx's end is not reported as a failure.
func TestRunDoesNotReportCancelledRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	reported := false
	require.NoError(t, watch.Run(ctx, watch.Task{Every: time.Hour,
		Do:     func(ctx context.Context) error { return ctx.Err() },
		Failed: func(error) { reported = true }}))
	require.False(t, reported)
}

// The interval runs a task again without a wake.
func TestRunTicks(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := make(chan struct{}, 10)
	go func() {
		_ = watch.Run(ctx, watch.Task{Every: time.Millisecond, Do: func(context.Context) error { ran <- struct{}{}; return nil }})
	}()
	for range 3 {
		<-ran
	}
}
