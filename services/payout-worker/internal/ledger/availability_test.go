package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
)

func TestCreditsInsideTheSettlementDelayCannotBePaidOut(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	const delay = 2 * time.Second
	l := ledger.New(db.Pool).WithSettlementDelay(delay)
	require.NoError(t, l.Prepare(ctx, "stripe", "usd"))
	hold := func(id string, amount int64) error {
		return inTx(t, db, func(tx pgx.Tx) error {
			return l.Hold(ctx, tx, ledger.Payout{ID: id, UserID: "u1", Provider: "stripe", Amount: amount, Currency: "usd"})
		})
	}
	// 300 available (posted before the delay was configured), then 1000 within the delay.
	_, err := db.Pool.Exec(ctx, `INSERT INTO credit_availability (reference, user_id, currency, amount, available_at)
		VALUES ('stripe:old', 'u1', 'usd', 1, now() - interval '1 hour')`)
	require.NoError(t, err)
	_, err = ledger.New(db.Pool).CreditOnce(ctx, db.Pool, ledger.Claim{Group: "g", EventID: "e0"}, ledger.Receipt{Provider: "stripe", Reference: "pi_0", UserID: "u1", Amount: 300, Currency: "usd"})
	require.NoError(t, err)
	posted := time.Now()
	_, err = l.CreditOnce(ctx, db.Pool, ledger.Claim{Group: "g", EventID: "e1"}, ledger.Receipt{Provider: "stripe", Reference: "pi_1", UserID: "u1", Amount: 1000, Currency: "usd"})
	require.NoError(t, err)
	_, err = l.CreditOnce(ctx, db.Pool, ledger.Claim{Group: "g", EventID: "e2"}, ledger.Receipt{Provider: "stripe", Reference: "pi_1", UserID: "u1", Amount: 1000, Currency: "usd"})
	require.NoError(t, err, "a twin event of the same payment")
	var rows int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM credit_availability WHERE reference = 'stripe:pi_1'`).Scan(&rows))
	require.Equal(t, 1, rows)

	b, err := ledger.Balance(ctx, db.Pool, "u1", "usd")
	require.NoError(t, err)
	require.EqualValues(t, 1300, b, "credited at once")
	require.NoError(t, hold("p1", 300), "what is available can be paid out")
	err = hold("p2", 1)
	if time.Since(posted) < delay {
		require.ErrorIs(t, err, ledger.ErrNotYetAvailable)
		require.ErrorIs(t, err, ledger.ErrInsufficientFunds)
	}
	require.ErrorIs(t, hold("p3", 5000), ledger.ErrInsufficientFunds, "more than the balance: plain insufficient funds")

	// Postgres's clock decides availability: until it passes available_at
	// the hold is refused as not yet available, then it is taken.
	var last error
	require.Eventually(t, func() bool {
		last = hold("p4", 1000)
		return !errors.Is(last, ledger.ErrNotYetAvailable)
	}, 30*time.Second, 50*time.Millisecond, "the credit never became available")
	require.NoError(t, last, "available after the delay")
	reconcile(t, db)
}
