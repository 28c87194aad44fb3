package ledger_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
)

type returnsWorld struct {
	t   *testing.T
	db  *pgtest.DB
	l   *ledger.Ledger
	ctx context.Context
}

func newReturnsWorld(t *testing.T) *returnsWorld {
	t.Helper()
	db := pgtest.New(t)
	w := &returnsWorld{t: t, db: db, l: ledger.New(db.Pool), ctx: context.Background()}
	require.NoError(t, w.l.PrepareReturns(w.ctx, "stripe", "usd"))
	return w
}

func (w *returnsWorld) credit(ref, userID string, amount int64) {
	w.t.Helper()
	out, err := w.l.CreditOnce(w.ctx, w.db.Pool, ledger.Claim{Group: "g", EventID: "ev-" + ref}, ledger.Receipt{Provider: "stripe", Reference: ref, UserID: userID, Amount: amount, Currency: "usd"})
	require.NoError(w.t, err)
	require.Equal(w.t, ledger.Credited, out)
}

func (w *returnsWorld) apply(kind, payment, id string, amount int64, outcome string) (ledger.ReturnResult, error) {
	w.t.Helper()
	var res ledger.ReturnResult
	err := inTx(w.t, w.db, func(tx pgx.Tx) error {
		var err error
		res, err = w.l.ApplyReturn(w.ctx, tx, "stripe", kind, payment, "ev", event.Return{ID: id, Amount: amount, Currency: "usd", Outcome: outcome})
		return err
	})
	return res, err
}

// account is a system account's balance (the sum of its entries).
func (w *returnsWorld) account(name string) int64 {
	w.t.Helper()
	var b int64
	require.NoError(w.t, w.db.Pool.QueryRow(w.ctx, `
		SELECT coalesce(sum(e.amount), 0) FROM ledger_entries e JOIN wallets a ON a.id = e.wallet_id
		WHERE a.kind = 'system' AND a.owner = $1 AND a.currency = 'usd'`, name).Scan(&b))
	return b
}

func (w *returnsWorld) wallet(userID string) (balance, owed int64) {
	w.t.Helper()
	var err error
	balance, err = ledger.Balance(w.ctx, w.db.Pool, userID, "usd")
	require.NoError(w.t, err)
	owed, err = ledger.Owed(w.ctx, w.db.Pool, userID, "usd")
	require.NoError(w.t, err)
	return balance, owed
}

// postings lists the ledger as (kind, account, sum) rows, in a stable order.
func (w *returnsWorld) postings() []string {
	w.t.Helper()
	rows, err := w.db.Pool.Query(w.ctx, `
		SELECT t.kind || ' ' || a.kind || ':' || a.owner || ' ' || sum(e.amount)
		FROM ledger_entries e JOIN ledger_transactions t ON t.id = e.transaction_id JOIN wallets a ON a.id = e.wallet_id
		GROUP BY t.kind, a.kind, a.owner ORDER BY 1`)
	require.NoError(w.t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(w.t, err)
	return out
}

func TestPartialAndFullRefundsDebitOnceAndNeverBeyondThePayment(t *testing.T) {
	t.Parallel()
	w := newReturnsWorld(t)
	w.credit("pi_1", "u1", 1000)

	res, err := w.apply(ledger.ReturnRefund, "pi_1", "re_1", 300, event.OutcomeRefunded)
	require.NoError(t, err)
	require.Equal(t, []string{ledger.KindRefund}, res.Posted)
	res, err = w.apply(ledger.ReturnRefund, "pi_1", "re_1", 300, event.OutcomeRefunded)
	require.NoError(t, err, "refund.updated after refund.created")
	require.Empty(t, res.Posted, "the same refund posts once")

	_, err = w.apply(ledger.ReturnRefund, "pi_1", "re_2", 800, event.OutcomeRefunded)
	require.ErrorIs(t, err, ledger.ErrExceedsRefundable, "700 is left of the payment")
	_, err = w.apply(ledger.ReturnRefund, "pi_unknown", "re_3", 100, event.OutcomeRefunded)
	require.ErrorIs(t, err, ledger.ErrNotCredited)

	_, err = w.apply(ledger.ReturnRefund, "pi_1", "re_4", 700, event.OutcomeRefunded)
	require.NoError(t, err, "the rest of the payment is refundable")
	b, owed := w.wallet("u1")
	require.Zero(t, b)
	require.Zero(t, owed)
	require.EqualValues(t, 0, w.account("psp_clearing:stripe"), "everything that came in went back")
	reconcile(t, w.db)
}

func TestRefundVoidedAfterPostingIsReversedOnceAndVoidFirstMovesNothing(t *testing.T) {
	t.Parallel()
	w := newReturnsWorld(t)
	w.credit("pi_1", "u1", 1000)
	_, err := w.apply(ledger.ReturnRefund, "pi_1", "re_1", 400, event.OutcomeRefunded)
	require.NoError(t, err)
	res, err := w.apply(ledger.ReturnRefund, "pi_1", "re_1", 400, event.OutcomeRefundVoid)
	require.NoError(t, err)
	require.Equal(t, []string{ledger.KindRefundReversal}, res.Posted)
	res, err = w.apply(ledger.ReturnRefund, "pi_1", "re_1", 400, event.OutcomeRefundVoid)
	require.NoError(t, err)
	require.Empty(t, res.Posted, "reversed once")
	res, err = w.apply(ledger.ReturnRefund, "pi_1", "re_1", 400, event.OutcomeRefunded)
	require.NoError(t, err)
	require.Empty(t, res.Posted, "a stale refund.created after the failure moves nothing")

	// refund.updated (canceled) overtakes refund.created.
	res, err = w.apply(ledger.ReturnRefund, "pi_1", "re_2", 200, event.OutcomeRefundVoid)
	require.NoError(t, err)
	require.Empty(t, res.Posted)
	res, err = w.apply(ledger.ReturnRefund, "pi_1", "re_2", 200, event.OutcomeRefunded)
	require.NoError(t, err)
	require.Empty(t, res.Posted)

	b, _ := w.wallet("u1")
	require.EqualValues(t, 1000, b)
	reconcile(t, w.db)
}

func TestDisputeClosedBeforeCreatedEndsInTheSameLedger(t *testing.T) {
	t.Parallel()
	for _, outcome := range []string{event.OutcomeDisputeWon, event.OutcomeDisputeLost} {
		inOrder, reversed := newReturnsWorld(t), newReturnsWorld(t)
		for _, w := range []*returnsWorld{inOrder, reversed} {
			w.credit("pi_1", "u1", 1000)
		}
		_, err := inOrder.apply(ledger.ReturnDispute, "pi_1", "dp_1", 600, event.OutcomeDisputeOpen)
		require.NoError(t, err)
		b, _ := inOrder.wallet("u1")
		require.EqualValues(t, 400, b, "the disputed amount is frozen")
		require.EqualValues(t, 600, inOrder.account("disputes"))
		_, err = inOrder.apply(ledger.ReturnDispute, "pi_1", "dp_1", 600, outcome)
		require.NoError(t, err)

		_, err = reversed.apply(ledger.ReturnDispute, "pi_1", "dp_1", 600, outcome)
		require.NoError(t, err)
		res, err := reversed.apply(ledger.ReturnDispute, "pi_1", "dp_1", 600, event.OutcomeDisputeOpen)
		require.NoError(t, err)
		require.Empty(t, res.Posted, "dispute.created after dispute.closed is stale")

		require.Equal(t, inOrder.postings(), reversed.postings(), outcome)
		for _, w := range []*returnsWorld{inOrder, reversed} {
			b, _ := w.wallet("u1")
			want := int64(1000)
			if outcome == event.OutcomeDisputeLost {
				want = 400
			}
			require.Equal(t, want, b, outcome)
			require.Zero(t, w.account("disputes"), "a closed dispute holds nothing")
			reconcile(t, w.db)
		}
		// A second close with the other outcome changes nothing.
		other := event.OutcomeDisputeWon
		if outcome == other {
			other = event.OutcomeDisputeLost
		}
		res, err = inOrder.apply(ledger.ReturnDispute, "pi_1", "dp_1", 600, other)
		require.NoError(t, err)
		require.Empty(t, res.Posted)
	}
}

func TestShortfallBecomesAReceivableThatBlocksPayoutsUntilACreditRepaysIt(t *testing.T) {
	t.Parallel()
	w := newReturnsWorld(t)
	w.credit("pi_1", "u1", 1000)
	require.NoError(t, inTx(t, w.db, func(tx pgx.Tx) error {
		return w.l.Hold(w.ctx, tx, ledger.Payout{ID: "p1", UserID: "u1", Provider: "stripe", Amount: 700, Currency: "usd"})
	}))
	res, err := w.apply(ledger.ReturnRefund, "pi_1", "re_1", 1000, event.OutcomeRefunded)
	require.NoError(t, err)
	require.EqualValues(t, 700, res.Owed)
	b, owed := w.wallet("u1")
	require.Zero(t, b, "the balance never goes negative")
	require.EqualValues(t, 700, owed)
	require.EqualValues(t, -700, w.account("receivables"))

	w.credit("pi_2", "u1", 500)
	b, owed = w.wallet("u1")
	require.Zero(t, b, "a new credit repays the receivable first")
	require.EqualValues(t, 200, owed)
	err = inTx(t, w.db, func(tx pgx.Tx) error {
		return w.l.Hold(w.ctx, tx, ledger.Payout{ID: "p2", UserID: "u1", Provider: "stripe", Amount: 1, Currency: "usd"})
	})
	require.ErrorIs(t, err, ledger.ErrWalletOwes)
	require.ErrorIs(t, err, ledger.ErrInsufficientFunds)

	// The failed payout's hold comes back and repays the rest.
	require.NoError(t, inTx(t, w.db, func(tx pgx.Tx) error {
		return w.l.Release(w.ctx, tx, ledger.Payout{ID: "p1", UserID: "u1", Provider: "stripe", Amount: 700, Currency: "usd"})
	}))
	b, owed = w.wallet("u1")
	require.EqualValues(t, 500, b)
	require.Zero(t, owed)
	require.Zero(t, w.account("receivables"), "repaid in full")
	require.NoError(t, inTx(t, w.db, func(tx pgx.Tx) error {
		return w.l.Hold(w.ctx, tx, ledger.Payout{ID: "p3", UserID: "u1", Provider: "stripe", Amount: 500, Currency: "usd"})
	}), "unblocked once repaid")
	reconcile(t, w.db)
}
