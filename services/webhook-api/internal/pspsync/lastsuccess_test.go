package pspsync_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/pspsync"
)

const lastSuccessMetric = "aegis_psp_reconciliation_last_success_timestamp_seconds"

// gathered is name's samples on reg, by their value.
func gathered(t *testing.T, reg *prometheus.Registry, name string) []float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var out []float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				out = append(out, m.GetGauge().GetValue())
			case m.GetCounter() != nil:
				out = append(out, m.GetCounter().GetValue())
			}
		}
	}
	return out
}

// Two replicas (two River clients, each with its own registry) export the
// same last-success time, the database's: the one that worked the run and
// the one that did not. Before the first success there is no sample (not a
// 0 that reads as decades stale), and the run counter has both statuses
// at 0 from the start.
func TestLastSuccessIsTheDatabasesOnEveryReplica(t *testing.T) {
	e := newBareEnv(t, pspsync.Config{Window: time.Hour, Grace: time.Hour})
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	var runners []*jobs.Runner
	for _, reg := range regs {
		r, _, err := pspsync.NewRunner(e.db.Pool, e.runs, e.rec,
			pspsync.RunnerConfig{Interval: time.Hour, FetchPoll: 20 * time.Millisecond},
			lifecycle.Deps{Logger: quiet(), Registerer: reg})
		require.NoError(t, err)
		require.Empty(t, gathered(t, reg, lastSuccessMetric), "no run has succeeded")
		require.Equal(t, 2, testutil.CollectAndCount(reg, "aegis_psp_reconciliation_runs_total"), "succeeded and failed from the start")
		runners = append(runners, r)
	}
	for _, r := range runners {
		require.NoError(t, r.Start(context.Background()))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, r.Stop(ctx))
		})
	}
	var id int64
	require.Eventually(t, func() bool {
		return e.db.Pool.QueryRow(context.Background(), `SELECT id FROM psp_reconciliation_runs WHERE trigger = 'scheduled'`).Scan(&id) == nil
	}, 60*time.Second, 20*time.Millisecond, "no scheduled run")
	e.finished(id)
	require.Equal(t, pspsync.StatusSucceeded, e.read(id).Status)
	var finished time.Time
	require.NoError(t, e.db.Pool.QueryRow(context.Background(),
		`SELECT finished_at FROM psp_reconciliation_runs WHERE id = $1`, id).Scan(&finished))
	want := float64(finished.UnixNano()) / 1e9
	for i, reg := range regs {
		got := gathered(t, reg, lastSuccessMetric)
		require.Len(t, got, 1, "replica %d", i)
		require.InDelta(t, want, got[0], 1e-3, "replica %d", i)
	}
	// The replica that worked the run counted it; the other did not.
	var succeeded float64
	for _, reg := range regs {
		vals := gathered(t, reg, "aegis_psp_reconciliation_runs_total")
		for _, v := range vals {
			succeeded += v
		}
	}
	require.InDelta(t, 1, succeeded, 0)
}

// On demand only (no interval), no run is due: no last-success gauge to
// alert on.
func TestLastSuccessIsNotExportedWithoutASchedule(t *testing.T) {
	e := newBareEnv(t, pspsync.Config{Window: time.Hour, Grace: time.Hour})
	reg := prometheus.NewRegistry()
	_, _, err := pspsync.NewRunner(e.db.Pool, e.runs, e.rec, pspsync.RunnerConfig{},
		lifecycle.Deps{Logger: quiet(), Registerer: reg})
	require.NoError(t, err)
	_, err = e.db.Pool.Exec(context.Background(), `INSERT INTO psp_reconciliation_runs (status, trigger, finished_at) VALUES ('succeeded', 'manual', now())`)
	require.NoError(t, err)
	require.Empty(t, gathered(t, reg, lastSuccessMetric))
}
