package recon_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/recon"
)

// leg is one planted ledger entry: an account and what moves into it.
type leg struct {
	kind, owner string
	amount      int64
}

// post plants one balanced ledger transaction as the worker's ledger
// writes it; user legs move the wallet's stored balance with them.
func (b *bundle) post(t *testing.T, kind, ref string, legs ...leg) {
	t.Helper()
	entries := make([]fixture.Leg, len(legs))
	for i, l := range legs {
		entries[i] = fixture.Leg{Account: fixture.Account{Kind: l.kind, Owner: l.owner}, Amount: l.amount}
	}
	fixture.Posting{Kind: kind, Reference: ref, Legs: entries}.Insert(t, b.db.Pool)
}

func (b *bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// payout plants a payout row in status (no ledger postings).
func (b *bundle) payout(t *testing.T, id, user string, status payoutstate.Status, amount int64) {
	t.Helper()
	fixture.Payout{ID: id, UserID: user, Amount: amount, Status: status}.Insert(t, b.db.Pool)
}

// returnObject plants a payment_returns row (a refund or dispute as the
// worker records it).
func (b *bundle) returnObject(t *testing.T, kind, objectID, user, state string, amount int64) {
	t.Helper()
	b.exec(t, `INSERT INTO payment_returns (provider, object_id, kind, payment_reference, user_id, currency, amount, state, last_event_id)
		VALUES ('stripe', $1, $2, 'stripe:pi_1', $3, 'usd', $4, $5, 'evt_1')`, objectID, kind, user, amount, state)
}

func (b *bundle) alertSummary(t *testing.T) string {
	t.Helper()
	require.Eventually(t, func() bool { return len(b.hook.got()) == 1 }, 30*time.Second, 10*time.Millisecond)
	return b.hook.got()[0]["summary"].(string)
}

// Each unfinished payout holds exactly its amount from its hold until it is
// settled or released: a payout still waiting at the PSP whose hold was
// released (the money is back in the wallet while the PSP may pay), and
// one in flight with no hold at all, are both named with expected and
// actual; the holds account's total is off by the same money.
func TestUnfinishedPayoutHoldsAreChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.credit(t, "alice", 5000, "pi_1")
	const (
		fine     = "0193a9c8-0000-7000-8000-0000000000b1"
		released = "0193a9c8-0000-7000-8000-0000000000b2"
		noHold   = "0193a9c8-0000-7000-8000-0000000000b3"
		fresh    = "0193a9c8-0000-7000-8000-0000000000b4"
		reviewed = "0193a9c8-0000-7000-8000-0000000000b5"
	)
	b.payoutWithHold(t, fine, "alice", payoutstate.Sent, 400, false)
	b.payoutWithHold(t, released, "alice", payoutstate.Awaiting, 700, true)
	b.payout(t, noHold, "alice", payoutstate.Sending, 250)
	b.payout(t, fresh, "alice", payoutstate.Initialized, 900) // no hold yet: fine
	// Paid after its hold was released: in review with nothing held, fine.
	b.payoutWithHold(t, reviewed, "alice", payoutstate.NeedsReview, 100, true)

	run, err := b.rec.Run(ctx, recon.TriggerManual, "ops")
	require.NoError(t, err)
	require.False(t, run.OK)
	require.Equal(t, int64(2), run.Summary.HoldMismatches)
	require.Equal(t, []recon.PayoutHold{
		{PayoutID: released, UserID: "alice", Status: "AWAITING_RESPONSE", Currency: "usd", Expected: 700, Actual: 0},
		{PayoutID: noHold, UserID: "alice", Status: "SENDING_TO_GATEWAY", Currency: "usd", Expected: 250, Actual: 0},
	}, run.Summary.HeldPayouts)
	require.Equal(t, []recon.AccountMismatch{{Owner: "payout_holds", Currency: "usd", Expected: 400 + 700 + 250, Actual: 400}},
		run.Summary.AccountProblems)
	require.Equal(t, int64(3), run.Summary.Discrepancies())
	summary := b.alertSummary(t)
	require.Contains(t, summary, "payout_holds: payout "+released+" (user alice, AWAITING_RESPONSE) expected=700 actual=0 usd")
	require.Contains(t, summary, "payout_holds/usd expected=1350 actual=400")
	require.Equal(t, 1.0, b.criticals(t))
}

// The disputes account holds each open dispute's amount and nothing of a
// closed one: a dispute recorded won whose release was never posted, and
// a disputes entry that belongs to no dispute, are named.
func TestDisputesAccountIsChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.credit(t, "alice", 5000, "pi_1")
	b.returnObject(t, "dispute", "dp_open", "alice", "open", 300)
	b.post(t, "dispute_hold", "stripe:dp_open", leg{"user", "alice", -300}, leg{"system", "disputes", 300})
	b.returnObject(t, "dispute", "dp_won", "alice", "won", 200)
	b.post(t, "dispute_hold", "stripe:dp_won", leg{"user", "alice", -200}, leg{"system", "disputes", 200})
	// dp_won's dispute_release (disputes → wallet) is missing.

	run, err := b.rec.Run(ctx, recon.TriggerScheduled, "")
	require.NoError(t, err)
	require.False(t, run.OK)
	require.Equal(t, int64(1), run.Summary.DisputeMismatches)
	require.Equal(t, []recon.DisputeShare{{Dispute: "stripe:dp_won", UserID: "alice", Currency: "usd", State: "won", Expected: 0, Actual: 200}},
		run.Summary.Disputes)
	require.Equal(t, []recon.AccountMismatch{{Owner: "disputes", Currency: "usd", Expected: 300, Actual: 500}}, run.Summary.AccountProblems)
	summary := b.alertSummary(t)
	require.Contains(t, summary, "disputes: dispute stripe:dp_won (user alice, won) expected=0 actual=200 usd")
	require.Contains(t, summary, "disputes/usd expected=300 actual=500")
}

// receivables = −Σ owed, and per user: a refund the wallet could not cover
// whose shortfall was never added to owed, and an owed set by hand with
// nothing in receivables behind it, are named per user.
func TestReceivablesAreCheckedAgainstWhatUsersOwe(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.credit(t, "alice", 100, "pi_1")
	// alice: a refund of 300 her wallet covered 100 of; owed += 200. Fine.
	b.returnObject(t, "refund", "re_a", "alice", "refunded", 300)
	b.post(t, "refund", "stripe:re_a", leg{"user", "alice", -100}, leg{"system", "receivables", -200}, leg{"system", "psp_clearing:stripe", 300})
	b.exec(t, `UPDATE wallets SET owed = 200 WHERE kind = 'user' AND owner = 'alice'`)
	// bob: a refund his empty wallet covered none of; owed never raised.
	b.wallet(t, "user", "bob")
	b.returnObject(t, "refund", "re_b", "bob", "refunded", 150)
	b.post(t, "refund", "stripe:re_b", leg{"system", "receivables", -150}, leg{"system", "psp_clearing:stripe", 150})
	// carol: owes 80 that receivables know nothing of.
	b.wallet(t, "user", "carol")
	b.exec(t, `UPDATE wallets SET owed = 80 WHERE kind = 'user' AND owner = 'carol'`)

	run, err := b.rec.Run(ctx, recon.TriggerManual, "ops")
	require.NoError(t, err)
	require.False(t, run.OK)
	require.Equal(t, int64(2), run.Summary.ReceivableMismatches)
	require.Equal(t, []recon.UserReceivable{
		{UserID: "bob", Currency: "usd", Owed: 0, LedgerOwed: 150},
		{UserID: "carol", Currency: "usd", Owed: 80, LedgerOwed: 0},
	}, run.Summary.Receivables)
	require.Equal(t, []recon.AccountMismatch{{Owner: "receivables", Currency: "usd", Expected: -280, Actual: -350}}, run.Summary.AccountProblems)
	summary := b.alertSummary(t)
	require.Contains(t, summary, "receivables: user bob owed=0 receivables say=150 usd")
	require.Contains(t, summary, "receivables/usd expected=-280 actual=-350")

	// A repayment moves the receivable back: alice repays all she owes.
	b.credit(t, "alice", 200, "pi_2")
	b.post(t, "receivable_repay", "credit:stripe:pi_2", leg{"user", "alice", -200}, leg{"system", "receivables", 200})
	b.exec(t, `UPDATE wallets SET owed = 0 WHERE kind = 'user' AND owner = 'alice'`)
	b.exec(t, `UPDATE wallets SET owed = 150 WHERE kind = 'user' AND owner = 'bob'`)
	b.exec(t, `UPDATE wallets SET owed = 0 WHERE kind = 'user' AND owner = 'carol'`)
	run, err = b.rec.Run(ctx, recon.TriggerManual, "ops")
	require.NoError(t, err)
	require.True(t, run.OK, "%+v", run.Summary)
}
