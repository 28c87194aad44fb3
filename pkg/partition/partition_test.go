package partition_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/partition"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// day is midnight UTC d days from today.
func day(d int) time.Time {
	return time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, d)
}

// setup is a database whose webhook_events has history: the partition
// migration's legacy partition is replaced (as the owner) by one that ended
// 105 days ago, a daily partition of 100 days ago and one of 10 days ago,
// each with one event (and one of an hour ago, in today's partition), and
// the partitions from tomorrow on are dropped so that the keeper has some
// to make.
func setup(t *testing.T) *pgtest.DB {
	t.Helper()
	db := pgtest.New(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := db.Pool.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	exec(`DROP TABLE webhook_events_legacy`)
	rows, err := db.Pool.Query(ctx, `SELECT part::text FROM partition_bounds('webhook_events') WHERE lo > now()`)
	require.NoError(t, err)
	var future []string
	for rows.Next() {
		var p string
		require.NoError(t, rows.Scan(&p))
		future = append(future, p)
	}
	require.NoError(t, rows.Err())
	for _, p := range future {
		exec(`DROP TABLE ` + p)
	}
	exec(fmt.Sprintf(`CREATE TABLE old_legacy PARTITION OF webhook_events FOR VALUES FROM (MINVALUE) TO ('%s')`, day(-105).Format(time.RFC3339)))
	for _, d := range []int{-100, -10, 0} {
		exec(fmt.Sprintf(`CREATE TABLE IF NOT EXISTS webhook_events_p%s PARTITION OF webhook_events FOR VALUES FROM ('%s') TO ('%s')`,
			day(d).Format("20060102"), day(d).Format(time.RFC3339), day(d+1).Format(time.RFC3339)))
	}
	for i, at := range []time.Time{day(-120), day(-100).Add(time.Hour), day(-10).Add(time.Hour), time.Now().Add(-time.Hour)} {
		exec(`INSERT INTO webhook_events (provider, event_id, event_type, payload, correlation_id, received_at)
			VALUES ('stripe', $1, 'charge.succeeded', '{}', 'c', $2)`, fmt.Sprintf("evt_%d", i), at)
	}
	return db
}

// startKeeper runs a Keeper of webhook_events as webhook-api's role at its
// defaults until the test ends.
func startKeeper(t *testing.T, db *pgtest.DB) {
	t.Helper()
	k, err := partition.New(db.As(t, migrations.RoleWebhookAPI), partition.Config{Tables: []string{"webhook_events"}}, lifecycle.Deps{})
	require.NoError(t, err)
	c := k.Component(lifecycle.Deps{})
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.Stop(stopCtx))
	})
}

func partitions(t *testing.T, db *pgtest.DB) map[string]bool {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT part::text FROM partition_bounds('webhook_events')`)
	require.NoError(t, err)
	got := map[string]bool{}
	for rows.Next() {
		var p string
		require.NoError(t, rows.Scan(&p))
		got[p] = true
	}
	require.NoError(t, rows.Err())
	return got
}

// The Keeper, as webhook-api's role: partitions wholly older than the
// retention (90 days) are dropped with their rows, a newer one is kept,
// and partitions are made up to premake_days (14) ahead. The gauges then
// say how far ahead they reach and that nothing is overdue.
func TestKeeperDropsExpiredPartitionsAndMakesFutureOnes(t *testing.T) {
	db := setup(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	gauges := partition.Gauges(db.As(t, migrations.RoleWebhookAPI), []string{"webhook_events"}, slog.New(slog.DiscardHandler))
	require.NoError(t, reg.Register(gauges))
	overdue := gauge(t, reg, "aegis_partition_retention_overdue_seconds")
	require.Greater(t, overdue, float64(15*24*3600), "the oldest partition ended 105 days ago, 15 days past the retention")
	require.Less(t, overdue, float64(16*24*3600))

	startKeeper(t, db)
	last := "webhook_events_p" + day(14).Format("20060102")
	require.Eventually(t, func() bool { return partitions(t, db)[last] }, 30*time.Second, 20*time.Millisecond,
		"the job made no partitions ahead")

	got := partitions(t, db)
	require.False(t, got["old_legacy"], "the partition [MINVALUE, 105 days ago) is past the retention")
	require.False(t, got["webhook_events_p"+day(-100).Format("20060102")], "the partition of 100 days ago is past the retention")
	require.True(t, got["webhook_events_p"+day(-10).Format("20060102")], "the partition of 10 days ago is kept")
	for d := 0; d <= 14; d++ {
		require.True(t, got["webhook_events_p"+day(d).Format("20060102")], "no partition %d days ahead", d)
	}
	require.False(t, got["webhook_events_p"+day(15).Format("20060102")], "partitions beyond premake_days")

	var ids []string
	rows, err := db.Pool.Query(ctx, `SELECT event_id FROM webhook_events ORDER BY event_id`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"evt_2", "evt_3"}, ids, "the rows of the dropped partitions are gone, the kept ones stay")

	var keys []string
	rows, err = db.Pool.Query(ctx, `SELECT event_id FROM webhook_event_keys ORDER BY event_id`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		keys = append(keys, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"evt_3"}, keys, "dedupe keys older than the horizon (7 days) and a day are trimmed")

	require.Zero(t, gauge(t, reg, "aegis_partition_retention_overdue_seconds"))
	ahead := gauge(t, reg, "aegis_partitions_ahead_seconds")
	require.Greater(t, ahead, float64(14*24*3600), "partitions reach past 14 days ahead")
	require.LessOrEqual(t, ahead, float64(15*24*3600))

	// A second run finds nothing due.
	r, err := partition.Maintain(ctx, db.As(t, migrations.RoleWebhookAPI), "webhook_events")
	require.NoError(t, err)
	require.Equal(t, partition.Result{TimeScale: 1}, r)
}

// maintain_partitions refuses a table no policy lists: the job's role can
// cause DDL on the policy's tables only.
func TestMaintainRefusesATableWithoutPolicy(t *testing.T) {
	db := pgtest.New(t)
	_, err := partition.Maintain(context.Background(), db.As(t, migrations.RoleWebhookAPI), "payouts")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "42501", pgErr.Code, "insufficient_privilege")
}

// gauge is the value of the one-table gauge name in reg's gather.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			require.Len(t, f.GetMetric(), 1)
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s exported", name)
	return 0
}

// The policy refuses a dedupe horizon under 7 days (Stripe retries for 3,
// the reconciliation reads a day back) and a retention that does not
// outlast the horizon by a day: a partition the dedupe looks in is never
// dropped.
func TestPolicyRefusesAShortHorizonOrRetention(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	for _, set := range []string{
		`dedupe_horizon = interval '3 days'`,
		`retention = interval '7 days'`,
		`retention = interval '8 days', dedupe_horizon = interval '8 days'`,
		`premake_days = 1`,
	} {
		_, err := db.Pool.Exec(ctx, `UPDATE partition_policies SET `+set+` WHERE table_name = 'webhook_events'`)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, set)
		require.Equal(t, "23514", pgErr.Code, "%s: a check violation", set)
	}
	_, err := db.Pool.Exec(ctx, `UPDATE partition_policies SET retention = interval '30 days', dedupe_horizon = interval '10 days'
		WHERE table_name = 'webhook_events'`)
	require.NoError(t, err, "a longer horizon with a retention past it")
}

// While the contract migration that partitions webhook_events (000056) is
// held back (every migration before it applied), the keeper runs against the
// unpartitioned table: it only trims the dedupe keys, and the gauges have
// no line for the table (no AegisPartitionsAheadShort for a table that has
// no partitions yet).
func TestKeeperBeforeTheTableIsPartitioned(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.Empty(t)
	require.NoError(t, migrations.UpTo(dbURL, 55))
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	for i, at := range []time.Time{time.Now().AddDate(0, 0, -9), time.Now().Add(-time.Hour)} {
		_, err := pool.Exec(ctx, `INSERT INTO webhook_events (provider, event_id, event_type, payload, correlation_id, received_at)
			VALUES ('stripe', $1, 't', '{}', 'c', $2)`, fmt.Sprintf("evt_%d", i), at)
		require.NoError(t, err)
	}

	r, err := partition.Maintain(ctx, pool, "webhook_events")
	require.NoError(t, err)
	require.Equal(t, partition.Result{KeysTrimmed: 1, TimeScale: 1}, r, "the 9-day-old key is trimmed, nothing else is done")
	var keys, events int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_event_keys), (SELECT count(*) FROM webhook_events)`).Scan(&keys, &events))
	require.Equal(t, 1, keys)
	require.Equal(t, 2, events, "rows are never deleted")

	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(partition.Gauges(pool, []string{"webhook_events"}, slog.New(slog.DiscardHandler))))
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Empty(t, families, "no gauge for a table with no partitions yet")
}

// A scaled policy (Rescale, for soaks and tests) is the default one
// compressed: at 86 400 a partition spans a second, the dedupe horizon is
// 7 s, the retention 90 s, and the floors still hold at that scale. The
// keeper, which runs by the scale, then makes partitions ahead and drops an
// expired one with its row within seconds, and its key is trimmed once past
// the horizon, so the event is new again. A table holding a row is never
// rescaled.
func TestScaledPolicyMakesAndDropsPartitionsWithinSeconds(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	insert := func(id string) int64 {
		t.Helper()
		tag, err := db.Pool.Exec(ctx, `INSERT INTO webhook_events (provider, event_id, event_type, payload, correlation_id)
			VALUES ('stripe', $1, 'charge.succeeded', '{}', 'c')`, id)
		require.NoError(t, err)
		return tag.RowsAffected()
	}
	require.EqualValues(t, 1, insert("evt_held"))
	_, err := partition.Rescale(ctx, db.Pool, "webhook_events", 86400)
	require.ErrorContains(t, err, "holds rows")
	_, err = db.Pool.Exec(ctx, `DELETE FROM webhook_events`)
	require.NoError(t, err)

	made, err := partition.Rescale(ctx, db.Pool, "webhook_events", 86400)
	require.NoError(t, err)
	require.Equal(t, 15, made, "the current partition and premake_days (14) ahead")
	var retention, horizon float64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT extract(epoch FROM retention)::float8, extract(epoch FROM dedupe_horizon)::float8
		FROM partition_policies WHERE table_name = 'webhook_events'`).Scan(&retention, &horizon))
	require.InDelta(t, 90, retention, 0.001)
	require.InDelta(t, 7, horizon, 0.001)
	for _, set := range []string{`dedupe_horizon = interval '6 seconds'`, `retention = interval '8 seconds'`, `time_scale = 0`} {
		_, err := db.Pool.Exec(ctx, `UPDATE partition_policies SET `+set+` WHERE table_name = 'webhook_events'`)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, set)
		require.Equal(t, "23514", pgErr.Code, "%s: a check violation", set)
	}
	_, err = db.Pool.Exec(ctx, `UPDATE partition_policies SET retention = interval '9 seconds' WHERE table_name = 'webhook_events'`)
	require.NoError(t, err, "9 s outlasts the 7 s horizon by more than a day / 86 400")

	require.EqualValues(t, 1, insert("evt_a"))
	require.EqualValues(t, 0, insert("evt_a"), "a duplicate within the horizon")
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(partition.Gauges(db.As(t, migrations.RoleWebhookAPI), []string{"webhook_events"}, slog.New(slog.DiscardHandler))))
	require.Equal(t, float64(86400), gauge(t, reg, "aegis_partition_time_scale"))

	// An hour's interval at this scale is 42 ms.
	startKeeper(t, db)
	var events, keys int
	require.Eventually(t, func() bool {
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_events), (SELECT count(*) FROM webhook_event_keys)`).Scan(&events, &keys))
		return events == 0 && keys == 0
	}, 30*time.Second, 100*time.Millisecond, "evt_a's partition is dropped past the 9 s retention and its key trimmed past the horizon")
	require.EqualValues(t, 1, insert("evt_a"), "past the horizon the event is new again")
	ahead := gauge(t, reg, "aegis_partitions_ahead_seconds")
	require.Greater(t, ahead, 13.0, "partitions are kept 14 s ahead")
	require.LessOrEqual(t, ahead, 16.0)
	require.Zero(t, gauge(t, reg, "aegis_partition_retention_overdue_seconds"))
}
