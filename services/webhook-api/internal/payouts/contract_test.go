package payouts_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/destinations"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/payouts"
)

// The store works with the grants webhook-api keeps after the next
// release's contract: no SELECT, INSERT or UPDATE on payouts or
// payout_transitions, only their _for_api views and payout-worker's
// create_payout and cancel_payout. Every path that reads or writes a
// payout runs as the role: a new payout under every limit (the daily sum,
// the new destination's), its read back with its history, the replay of
// its Idempotency-Key, a key reused with another body, the replay that
// finds the key taken by a concurrent request only at create_payout, and a
// cancel and its repeat.
func TestStoreWorksWithTheGrantsLeftAfterTheContract(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	db.AfterContract(t)
	api := db.As(t, migrations.RoleWebhookAPI)
	var pgErr *pgconn.PgError
	_, err := api.Exec(ctx, `SELECT count(*) FROM payouts`)
	require.True(t, errors.As(err, &pgErr) && pgErr.Code == "42501", "the contract is applied: reading payouts is refused, got %v", err)

	_, _, err = destinations.NewStore(api).Register(ctx, "acme", "alice", "connected_account",
		destinations.Registration{Provider: "stripe", Destination: "acct_123"}, destinations.Found{})
	require.NoError(t, err)
	limits := payouts.Limits{PerPayout: map[string]int64{"usd": 10_000}, Daily: map[string]int64{"usd": 20_000},
		NewDestination: map[string]int64{"usd": 20_000}, CoolingOff: time.Hour}
	store := payouts.NewStore(api, noNotify{}, limits)
	req := payouts.Request{UserID: "alice", Amount: 1500, Currency: "usd", Destination: "acct_123", Provider: "stripe"}

	p, created, err := store.Create(ctx, "acme", "key-1", req)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, string(payoutstate.Initialized), p.Status)
	require.Equal(t, "alice", p.UserID)
	require.EqualValues(t, 1500, p.Amount)
	require.NotEmpty(t, p.DestinationID)
	require.Len(t, p.History, 1)
	require.Equal(t, string(payoutstate.Initialized), p.History[0].To)

	again, created, err := store.Create(ctx, "acme", "key-1", req)
	require.NoError(t, err)
	require.False(t, created, "the key's replay")
	require.Equal(t, p.ID, again.ID)

	other := req
	other.Amount = 1600
	_, _, err = store.Create(ctx, "acme", "key-1", other)
	require.ErrorIs(t, err, payouts.ErrKeyReused)

	// The limits read the payouts through the view: 1500 is counted.
	over := req
	over.Amount = 10_000
	_, _, err = store.Create(ctx, "acme", "key-2", over)
	require.NoError(t, err)
	_, _, err = store.Create(ctx, "acme", "key-3", over)
	var limit *payouts.LimitError
	require.ErrorAs(t, err, &limit)
	require.EqualValues(t, 11_500, limit.Used)

	// A concurrent request with key-4 holds the key uncommitted: the
	// store's first look finds nothing, create_payout waits for it and
	// then makes no payout, and the store answers the other's payout.
	small := req
	small.Amount = 100
	first, err := api.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(ctx) }()
	const firstID = "01930000-0000-7000-8000-0000000000b1"
	_, err = first.Exec(ctx, `SELECT id FROM create_payout($1::uuid, 'acme', 'key-4', $2, 'alice', 100, 'usd', 'acct_123',
		'stripe', 'corr', NULL)`, firstID, small.Hash())
	require.NoError(t, err)
	type result struct {
		p       payouts.Payout
		created bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		p, created, err := store.Create(ctx, "acme", "key-4", small)
		done <- result{p, created, err}
	}()
	waitForLockWait(t, db)
	require.NoError(t, first.Commit(ctx))
	r := <-done
	require.NoError(t, r.err)
	require.False(t, r.created)
	require.Equal(t, firstID, r.p.ID)

	canceled, err := store.Cancel(ctx, "acme", p.ID)
	require.NoError(t, err)
	require.Equal(t, string(payoutstate.Finalized), canceled.Status)
	require.Equal(t, payouts.ClassCanceled, canceled.ErrorClass)
	require.Len(t, canceled.History, 3)
	_, err = store.Cancel(ctx, "acme", p.ID)
	require.NoError(t, err, "canceled before: the same answer")
	_, err = store.Cancel(ctx, "acme", "01930000-0000-7000-8000-000000000000")
	require.ErrorIs(t, err, payouts.ErrNotFound)
}
