package jobs_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/recon"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/jobs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type noAlerts struct{}

func (noAlerts) Raise(context.Context, alert.Alert) {}

// The runner starts River, runs the scheduled reconciliation at the
// leader's start, and stops once; a second Stop and a Stop before Start are
// harmless, and River's goroutines are gone after Stop (goleak).
func TestRunnerLifecycleAndSchedule(t *testing.T) {
	db := pgtest.New(t)
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	deps := lifecycle.Deps{Logger: logger, Clock: time.Now}
	rec, err := recon.New(db.Pool, noAlerts{}, deps)
	require.NoError(t, err)
	r, err := jobs.New(db.Pool, replay.New(db.Pool, store.New(db.Pool), deps), rec,
		jobs.Config{ReplayRate: 10, ReconcileInterval: time.Hour, FetchPoll: 20 * time.Millisecond}, deps)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, r.Stop(ctx), "stop before start")
	require.NoError(t, r.Start(ctx))
	require.Eventually(t, func() bool {
		_, err := rec.Latest(ctx)
		return err == nil
	}, 30*time.Second, 20*time.Millisecond)
	run, err := rec.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, recon.TriggerScheduled, run.Trigger)
	require.NoError(t, r.Stop(ctx))
	require.NoError(t, r.Stop(ctx), "second stop")
}

func TestConfigValidation(t *testing.T) {
	db := pgtest.New(t)
	deps := lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	svc := replay.New(db.Pool, store.New(db.Pool), deps)
	_, err := jobs.New(db.Pool, svc, nil, jobs.Config{ReplaySlice: time.Minute, Kinds: jobs.Kinds{ReplayTimeout: time.Minute}}, deps)
	require.ErrorContains(t, err, "Kinds.ReplayTimeout")
	_, err = jobs.New(db.Pool, svc, nil, jobs.Config{ReplayRate: -1}, deps)
	require.ErrorContains(t, err, "Rate")
}
