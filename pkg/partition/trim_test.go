package partition_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/partition"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// expiredKeys is how many expired dedupe keys the trim tests start with:
// more than two of maintain_partitions' calls trim (100 000 each).
const expiredKeys = 250_000

// seedKeys writes n dedupe keys 9 days old (past the 7-day horizon and a
// day) and 10 of an hour ago, as the schema owner.
func seedKeys(t *testing.T, db *pgtest.DB, n int) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_event_keys (provider, event_id, received_at)
		SELECT 'stripe', 'evt_expired_' || i, now() - interval '9 days' - i * interval '1 millisecond'
		FROM generate_series(1, $1::int) i
		UNION ALL
		SELECT 'paystack', 'evt_fresh_' || i, now() - interval '1 hour' FROM generate_series(1, 10) i`, n)
	require.NoError(t, err)
}

func keyCounts(t *testing.T, db *pgtest.DB) (expired, fresh int) {
	t.Helper()
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT
		count(*) FILTER (WHERE received_at < now() - interval '8 days'),
		count(*) FILTER (WHERE received_at >= now() - interval '8 days') FROM webhook_event_keys`).Scan(&expired, &fresh))
	return expired, fresh
}

// One run of the keeper trims every expired dedupe key, however many more
// than one maintain_partitions call takes (main trimmed 100 000 a run,
// hourly: 2.4M a day, against 8.6M keys a day at 100 events/s), and keeps
// the keys within the horizon. The rate is logged: set
// AEGIS_TRIM_MEASURE_KEYS to measure with more keys.
func TestKeeperTrimsEveryExpiredKeyInOneRun(t *testing.T) {
	n := expiredKeys
	if v := os.Getenv("AEGIS_TRIM_MEASURE_KEYS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	db := pgtest.New(t)
	seedKeys(t, db, n)
	reg := prometheus.NewRegistry()
	k, err := partition.New(db.As(t, migrations.RoleWebhookAPI), partition.Config{Tables: []string{"webhook_events"}},
		lifecycle.Deps{Registerer: reg})
	require.NoError(t, err)

	start := time.Now()
	require.NoError(t, k.Once(context.Background()))
	took := time.Since(start)
	t.Logf("trimmed %d expired dedupe keys in %s: %.0f keys/s", n, took, float64(n)/took.Seconds())

	expired, fresh := keyCounts(t, db)
	require.Zero(t, expired, "every expired key is trimmed in one run")
	require.Equal(t, 10, fresh, "keys within the horizon stay")
	require.InDelta(t, float64(n), metric(t, reg, "aegis_partition_keys_trimmed_total"), 0)
}

// A run that spends its trim budget with keys left is followed by another
// after RetryAfter (not the hourly Interval) until none is left; the
// behind gauge says how long runs have ended with keys left, and is 0 again
// once they are all trimmed.
func TestKeeperComesBackSoonWhenItsTrimBudgetRunsOut(t *testing.T) {
	db := pgtest.New(t)
	seedKeys(t, db, expiredKeys)
	reg := prometheus.NewRegistry()
	k, err := partition.New(db.As(t, migrations.RoleWebhookAPI), partition.Config{
		Tables: []string{"webhook_events"}, Interval: time.Hour, RetryAfter: 300 * time.Millisecond,
		TrimBudget: time.Nanosecond, // one call a run
	}, lifecycle.Deps{Registerer: reg})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	var sawBehind bool
	require.Eventually(t, func() bool {
		sawBehind = sawBehind || metric(t, reg, "aegis_partition_keys_trim_behind_seconds") > 0
		expired, _ := keyCounts(t, db)
		return expired == 0 && metric(t, reg, "aegis_partition_keys_trim_behind_seconds") == 0
	}, time.Minute, 20*time.Millisecond, "the keeper does not come back to trim the keys left")
	cancel()
	require.NoError(t, <-done)
	require.True(t, sawBehind, "the behind gauge rose while keys were left")
	_, fresh := keyCounts(t, db)
	require.Equal(t, 10, fresh)
}

// metric is the value of webhook_events' series of the named metric in reg.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "table" && l.GetValue() == "webhook_events" {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{table=webhook_events}", name)
	return 0
}
