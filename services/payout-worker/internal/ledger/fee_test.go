package ledger_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
)

// systemBalance is the sum of a system account's entries.
func systemBalance(t *testing.T, db *pgtest.DB, owner, currency string) int64 {
	t.Helper()
	var b int64
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(e.amount), 0) FROM ledger_entries e
		JOIN wallets w ON w.id = e.wallet_id WHERE w.kind = 'system' AND w.owner = $1 AND w.currency = $2`, owner, currency).Scan(&b))
	return b
}

// What the PSP kept of a payment moves from the clearing account to the
// PSP's fees account, once with its credit, whichever path commits it; the
// wallet gets the whole payment.
func TestAPaymentsFeeIsPostedOnceWithItsCredit(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	l := ledger.New(db.Pool)
	c := startCommitter(t, db, ledger.CreditCommitterConfig{Workers: 1, MaxGroup: 4})
	receipt := func(ref string, amount, fee int64) ledger.Receipt {
		return ledger.Receipt{Provider: "paystack", Reference: ref, UserID: "u1", Amount: amount, Fee: fee, Currency: "ngn"}
	}

	out, err := l.CreditOnce(ctx, db.Pool, ledger.Claim{Group: "g", EventID: "e1"}, receipt("T1", 150_000, 2_350))
	require.NoError(t, err)
	require.Equal(t, ledger.Credited, out)
	out, err = l.CreditOnce(ctx, db.Pool, ledger.Claim{Group: "g", EventID: "e1-again"}, receipt("T1", 150_000, 2_350))
	require.NoError(t, err)
	require.Equal(t, ledger.AlreadyCredited, out, "the same payment under another event")
	out, err = c.Credit(ctx, ledger.Claim{Group: "g", EventID: "e2"}, receipt("T2", 10_000, 250))
	require.NoError(t, err)
	require.Equal(t, ledger.Credited, out)
	out, err = c.Credit(ctx, ledger.Claim{Group: "g", EventID: "e3"}, receipt("T3", 5_000, 0))
	require.NoError(t, err)
	require.Equal(t, ledger.Credited, out)
	require.NoError(t, inTx(t, db, func(tx pgx.Tx) error { return l.Credit(ctx, tx, receipt("T4", 1_000, 100)) }))

	b, err := ledger.Balance(ctx, db.Pool, "u1", "ngn")
	require.NoError(t, err)
	require.EqualValues(t, 166_000, b, "the wallet gets every payment whole")
	require.EqualValues(t, -2_700, systemBalance(t, db, "psp_fees:paystack", "ngn"), "the fees: the platform's cost")
	require.EqualValues(t, -(166_000 - 2_700), systemBalance(t, db, "psp_clearing:paystack", "ngn"),
		"the clearing account mirrors what the PSP holds: the payments less its fees")
	var feePostings int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM ledger_transactions WHERE kind = 'psp_fee'`).Scan(&feePostings))
	require.Equal(t, 3, feePostings, "one per payment with a fee, none for a payment without")

	_, err = l.CreditOnce(ctx, db.Pool, ledger.Claim{Group: "g", EventID: "e5"}, receipt("T5", 100, 101))
	require.Error(t, err, "a fee above the payment is refused")
	reconcile(t, db)
}
