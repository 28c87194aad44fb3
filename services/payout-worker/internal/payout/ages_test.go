package payout

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout/sqlcdb"
)

var agesDeadlines = Deadlines{Initialized: 30 * time.Minute, Sending: 15 * time.Minute, Retrying: 30 * time.Minute,
	Pending: 240 * time.Hour, Review: 24 * time.Hour}

// ageReplica is a payout-worker replica as far as the age gauges go: a
// processor that sweeps, and a registry of its own.
type ageReplica struct {
	proc *Processor
	reg  *prometheus.Registry
}

func newAgeReplica(t *testing.T, db *pgtest.DB, now func() time.Time) ageReplica {
	t.Helper()
	reg := prometheus.NewRegistry()
	deps := lifecycle.Deps{Logger: slog.New(slog.DiscardHandler), Registerer: reg, Clock: now}
	pool := db.As(t, migrations.RolePayoutWorker)
	proc := &Processor{pool: pool, logger: deps.Logger, now: now, metrics: newMetrics(reg)}
	require.NoError(t, RegisterAgeGauges(pool, agesDeadlines, deps))
	return ageReplica{proc: proc, reg: reg}
}

// gauge is r's value of name{state}, and whether it is exported.
func (r ageReplica) gauge(t *testing.T, name string, state Status) (float64, bool) {
	t.Helper()
	families, err := r.reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == string(state) {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// A replica that stopped winning the sweep lock exports the age of the
// oldest payout now, as the one that sweeps does, not what it saw at its
// last sweep: the alerts take the max over replicas, and a stale age would
// keep AegisPayoutReviewOverdue firing after the payout was resolved. A
// replica that never swept exports it too.
func TestEveryReplicaExportsTheCurrentPayoutAges(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	now := time.Now()
	clock := func() time.Time { return now }
	id := fixture.Payout{Status: NeedsReview, StatusSince: now.Add(-30 * time.Hour)}.Insert(t, db.Pool)

	first, second := newAgeReplica(t, db, clock), newAgeReplica(t, db, clock)
	_, err := first.proc.Sweep(ctx, SweepConfig{After: time.Minute, Every: time.Minute, Batch: 10, Deadlines: agesDeadlines})
	require.NoError(t, err)
	for name, r := range map[string]ageReplica{"swept": first, "never swept": second} {
		age, ok := r.gauge(t, "aegis_payout_oldest_age_seconds", NeedsReview)
		require.True(t, ok, name)
		require.InDelta(t, (30 * time.Hour).Seconds(), age, 1, name)
		overdue, _ := r.gauge(t, "aegis_payout_overdue", NeedsReview)
		require.Equal(t, 1.0, overdue, name)
	}

	// A person resolves it; the other replica sweeps from now on.
	_, err = db.Pool.Exec(ctx, `UPDATE payouts SET status = 'FAILED' WHERE id = $1`, id)
	require.NoError(t, err)
	now = now.Add(time.Minute)
	_, err = second.proc.Sweep(ctx, SweepConfig{After: time.Minute, Every: time.Minute, Batch: 10, Deadlines: agesDeadlines})
	require.NoError(t, err)
	for name, r := range map[string]ageReplica{"no longer sweeps": first, "sweeps": second} {
		age, ok := r.gauge(t, "aegis_payout_oldest_age_seconds", NeedsReview)
		require.True(t, ok, name)
		require.Zero(t, age, name)
		overdue, _ := r.gauge(t, "aegis_payout_overdue", NeedsReview)
		require.Zero(t, overdue, name)
	}
}

// PayoutAges measures every state a payout waits in, each once: its
// states are written out in the SQL, so a state added to unfinished()
// must be added there.
func TestPayoutAgesMeasuresEveryUnfinishedState(t *testing.T) {
	t.Parallel()
	tx := pgtest.Tx(t)
	now := time.Now()
	rows, err := sqlcdb.New(tx).PayoutAges(context.Background(), sqlcdb.PayoutAgesParams{Now: now, InitializedBefore: now,
		SendingBefore: now, RetryingBefore: now, PendingBefore: now, ReviewBefore: now})
	require.NoError(t, err)
	var got, want []string
	for _, r := range rows {
		got = append(got, r.Status)
	}
	for _, s := range unfinished() {
		want = append(want, string(s))
	}
	slices.Sort(got)
	slices.Sort(want)
	require.Equal(t, want, got)
}

// Read at every scrape of every replica, PayoutAges must stay an index
// probe per state whatever the plan cache does: under a generic plan (the
// one a prepared statement may switch to) it reads payouts_status_since_idx
// and never scans the table, however many finished or failed payouts there
// are.
func TestPayoutAgesIsAnIndexProbeUnderAGenericPlan(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO payouts (id, client_id, idempotency_key, request_hash, user_id, amount, currency, destination, provider, status, status_since)
		SELECT gen_random_uuid(), 'plan', 'k' || i, 'h', 'user-' || (i % 100), 100, 'usd', 'ba_1', 'stripe',
		       CASE WHEN i % 10 = 0 THEN 'FAILED' WHEN i % 500 = 1 THEN 'AWAITING_RESPONSE' ELSE 'SUCCEEDED' END,
		       now() - i * interval '1 second'
		FROM generate_series(1, 20000) i`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `ANALYZE payouts`)
	require.NoError(t, err)

	// The statement as the service sends it: pgx prepares it (its default
	// mode), and a generic plan of the prepared statement is explained.
	conn, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	defer func() { _ = conn.Close(ctx) }()
	_, err = conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`)
	require.NoError(t, err)
	now := time.Now()
	_, err = sqlcdb.New(conn).PayoutAges(ctx, sqlcdb.PayoutAgesParams{Now: now, InitializedBefore: now,
		SendingBefore: now, RetryingBefore: now, PendingBefore: now, ReviewBefore: now})
	require.NoError(t, err)
	var name string
	require.NoError(t, conn.QueryRow(ctx, `SELECT name FROM pg_prepared_statements
		WHERE statement LIKE '-- name: PayoutAges %'`).Scan(&name))
	// EXPLAIN takes no parameters: the values are written out.
	at, before := "'"+now.UTC().Format(time.RFC3339Nano)+"'", "'"+now.Add(-time.Hour).UTC().Format(time.RFC3339Nano)+"'"
	rows, err := conn.Query(ctx, "EXPLAIN EXECUTE "+pgx.Identifier{name}.Sanitize()+"("+at+strings.Repeat(", "+before, 5)+")")
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	plan := strings.Join(lines, "\n")
	require.NotContains(t, plan, "Seq Scan", plan)
	require.Equal(t, 2*len(unfinished()), strings.Count(plan, "using payouts_status_since_idx"), plan)
}
