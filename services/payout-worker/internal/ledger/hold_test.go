package ledger_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
)

// A payout's hold is one statement once the system accounts are prepared:
// posted, then recognised as posted without a second debit, and refused
// without a trace — each in one round trip.
func TestHoldIsOneStatement(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	l := ledger.New(db.Pool)
	ctx := context.Background()
	require.NoError(t, inTx(t, db, func(tx pgx.Tx) error {
		return l.Credit(ctx, tx, ledger.Receipt{Provider: "stripe", Reference: "pi_1", UserID: "u1", Amount: 1000, Currency: "usd"})
	}))
	require.NoError(t, l.Prepare(ctx, "stripe", "usd"))

	cfg, err := pgx.ParseConfig(db.URL)
	require.NoError(t, err)
	counter := &pgtest.RoundTrips{}
	cfg.Tracer = counter
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	hold := func(p ledger.Payout) (int64, error) {
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		before := counter.Count()
		herr := l.Hold(ctx, tx, p)
		n := counter.Count() - before
		require.NoError(t, tx.Commit(ctx))
		return n, herr
	}
	p := ledger.Payout{ID: "p1", UserID: "u1", Provider: "stripe", Amount: 600, Currency: "usd"}
	n, err := hold(p)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "a hold is one statement")

	n, err = hold(p)
	require.ErrorIs(t, err, ledger.ErrAlreadyPosted)
	require.EqualValues(t, 1, n)

	_, err = hold(ledger.Payout{ID: "p2", UserID: "u1", Provider: "stripe", Amount: 600, Currency: "usd"})
	require.ErrorIs(t, err, ledger.ErrInsufficientFunds)

	b, err := ledger.Balance(ctx, db.Pool, "u1", "usd")
	require.NoError(t, err)
	require.EqualValues(t, 400, b, "one debit of 600")
	var holds, entries int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_hold'`).Scan(&holds))
	require.NoError(t, db.Pool.QueryRow(ctx, `
		SELECT count(*) FROM ledger_entries e JOIN ledger_transactions t ON t.id = e.transaction_id
		WHERE t.kind = 'payout_hold'`).Scan(&entries))
	require.Equal(t, 1, holds, "the repeated and the refused hold wrote no transaction")
	require.Equal(t, 2, entries)
	reconcile(t, db)
}
