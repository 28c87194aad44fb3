package payouts_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/destinations"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/payouts"
)

// A new payout (POST /v1/payouts, no limits configured) takes six round
// trips to commit — BEGIN, the key's lookup, the destination, the payout
// with its first transition (create_payout), the outbox row (one batch),
// COMMIT — and four to read back; a cancel takes four — BEGIN,
// cancel_payout, the outbox row, COMMIT — and the same read. The create
// path is hot: a step added to it fails here.
func TestCreateAndCancelRoundTrips(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	_, _, err := destinations.NewStore(db.Pool).Register(ctx, "acme", "alice", "connected_account",
		destinations.Registration{Provider: "stripe", Destination: "acct_123"}, destinations.Found{})
	require.NoError(t, err)

	cfg, err := pgxpool.ParseConfig(db.URL)
	require.NoError(t, err)
	counter := &pgtest.RoundTrips{}
	cfg.ConnConfig.Tracer = counter
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, pool.Ping(ctx))
	store := payouts.NewStore(pool, noNotify{}, payouts.Limits{})

	before := counter.Count()
	p, created, err := store.Create(ctx, "acme", "key-1", payouts.Request{UserID: "alice", Amount: 1500, Currency: "usd",
		Destination: "acct_123", Provider: "stripe"})
	require.NoError(t, err)
	require.True(t, created)
	require.EqualValues(t, 6+4, counter.Count()-before, "statements of a new payout")

	before = counter.Count()
	_, err = store.Cancel(ctx, "acme", p.ID)
	require.NoError(t, err)
	require.EqualValues(t, 4+4, counter.Count()-before, "statements of a cancel")
}
