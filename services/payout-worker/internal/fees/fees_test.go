package fees_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/psptest"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/fees"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
)

func TestMain(m *testing.M) { os.Exit(psptest.Main(m)) }

func feesPosted(t *testing.T, db *pgtest.DB) (n int, total int64) {
	t.Helper()
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(DISTINCT t.id), coalesce(-sum(e.amount), 0)
		FROM ledger_transactions t JOIN ledger_entries e ON e.transaction_id = t.id JOIN wallets w ON w.id = e.wallet_id
		WHERE t.kind = 'psp_fee' AND w.owner = 'psp_fees:stripe'`).Scan(&n, &total))
	return n, total
}

// Stripe's fee on every payment to our wallets reaches the ledger once,
// from Stripe's balance transactions, whatever rounds overlap.
func TestStripeFeesArePostedOnceFromItsBalanceTransactions(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	psp := psptest.Start(t, nil)
	api := stripeapi.New("sk_test_aegis", psp.URL, &http.Client{Timeout: 10 * time.Second})
	now := time.Now().Add(time.Minute)
	cfg := fees.Config{Every: time.Hour, Window: time.Hour, Overlap: time.Hour, Grace: 0}
	c, err := fees.New(api, db.Pool, ledger.New(db.Pool), cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)),
		prometheus.NewRegistry(), func() time.Time { return now })
	require.NoError(t, err)

	var want int64
	for _, amount := range []int64{1_000, 2_500, 99_999} {
		p := psp.Pay(t, "stripe", "alice", amount, "usd")
		require.Positive(t, p.Fee)
		want += p.Fee
	}
	psp.Pay(t, "paystack", "alice", 10_000, "ngn") // not Stripe's

	r, err := c.Collect(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, r.Posted)
	n, total := feesPosted(t, db)
	require.Equal(t, 3, n)
	require.Equal(t, want, total, "the fees Stripe kept")

	// The next round overlaps the last (Overlap): nothing twice.
	now = now.Add(time.Minute)
	r, err = c.Collect(context.Background())
	require.NoError(t, err)
	require.Zero(t, r.Posted)
	require.Positive(t, r.Read, "the overlap was read again")
	n, total = feesPosted(t, db)
	require.Equal(t, 3, n)
	require.Equal(t, want, total)

	var clearing int64
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(e.amount), 0) FROM ledger_entries e
		JOIN wallets w ON w.id = e.wallet_id WHERE w.owner = 'psp_clearing:stripe'`).Scan(&clearing))
	require.Equal(t, want, clearing, "the fees left the clearing account (the credits are the handler's)")
}

// A round that cannot read Stripe posts nothing and keeps its window for
// the next.
func TestAFeeRoundThatCannotReadStripeKeepsItsWindow(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	down := stripeapi.New("sk_test_aegis", "http://127.0.0.1:1", &http.Client{Timeout: time.Second})
	c, err := fees.New(down, db.Pool, ledger.New(db.Pool), fees.DefaultConfig(), slog.New(slog.NewJSONHandler(io.Discard, nil)),
		prometheus.NewRegistry(), time.Now)
	require.NoError(t, err)
	_, err = c.Collect(context.Background())
	require.Error(t, err)
	var cursors int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM psp_fee_cursors`).Scan(&cursors))
	require.Zero(t, cursors, "the cursor did not move")
}

// readTo is what reg exports of the fee cursor: its value, and whether it
// is exported at all.
func readTo(t *testing.T, reg *prometheus.Registry) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == "aegis_psp_fees_read_to_timestamp_seconds" {
			require.Len(t, f.GetMetric(), 1)
			m := f.GetMetric()[0]
			require.Equal(t, "provider", m.GetLabel()[0].GetName())
			require.Equal(t, "stripe", m.GetLabel()[0].GetValue())
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// Every replica exports how far the fees were read as stored, including
// one that never ran a round (another holds the lock) and one restarted
// since: not a 0 until its own first round, up to PSP_FEE_INTERVAL later,
// which would page (AegisPSPFeesNotCollected).
func TestEveryReplicaExportsTheStoredFeeCursor(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	psp := psptest.Start(t, nil)
	api := stripeapi.New("sk_test_aegis", psp.URL, &http.Client{Timeout: 10 * time.Second})
	now := time.Now().Add(time.Minute)
	cfg := fees.Config{Every: time.Hour, Window: time.Hour, Overlap: time.Hour, Grace: 0}
	replica := func() (*fees.Collector, *prometheus.Registry) {
		reg := prometheus.NewRegistry()
		c, err := fees.New(api, db.As(t, migrations.RolePayoutWorker), ledger.New(db.Pool), cfg,
			slog.New(slog.DiscardHandler), reg, func() time.Time { return now })
		require.NoError(t, err)
		return c, reg
	}
	ran, ranReg := replica()
	_, idleReg := replica()
	_, ok := readTo(t, idleReg)
	require.False(t, ok, "no round stored yet: no figure, not a 0")

	psp.Pay(t, "stripe", "alice", 1_000, "usd")
	r, err := ran.Collect(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, r.Posted)

	_, restartedReg := replica()
	for name, reg := range map[string]*prometheus.Registry{"ran": ranReg, "idle": idleReg, "restarted": restartedReg} {
		v, ok := readTo(t, reg)
		require.True(t, ok, name)
		require.Equal(t, float64(r.To.Unix()), v, name)
	}
}
