package pspsync_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/pspsync"
)

// ngnCheck is the run's balance comparison of Paystack's ngn.
func ngnCheck(t *testing.T, r run) pspsync.BalanceCheck {
	t.Helper()
	for _, c := range r.Report["paystack"].Balance {
		if c.Currency == "ngn" {
			return c
		}
	}
	t.Fatalf("no ngn balance comparison in %+v", r.Report["paystack"])
	return pspsync.BalanceCheck{}
}

func balanceMismatches(r run) []pspsync.Disagreement {
	var out []pspsync.Disagreement
	for _, d := range r.Disagreements {
		if d.Kind == pspsync.BalanceMismatch {
			out = append(out, d)
		}
	}
	return out
}

// The PSP's balance is compared with its clearing account by how their
// difference moves between runs: the first run takes the difference (the
// money at the PSP Aegis never saw) as its baseline; a payment whose
// credit is not posted yet and a payout held while the PSP has paid it
// out explain a move; once the ledger posts the credit (and its fee) the
// difference is back. A transfer out of the PSP's balance that no payout
// here holds is a balance_mismatch naming the amount; the run after it
// takes the new difference as the baseline, so it pages once.
func TestPSPBalanceIsComparedWithTheClearingAccount(t *testing.T) {
	e := newEnv(t, pspsync.Config{Window: time.Hour, Grace: time.Hour, BalanceTolerance: 10})

	first := e.runOnce()
	base := ngnCheck(t, first)
	require.True(t, base.Baseline)
	require.Equal(t, base.Difference, base.SettledLow)
	require.Empty(t, balanceMismatches(first))

	// A payment: the PSP holds it less its fee; its credit is not posted.
	pay := e.psp.Pay(t, "paystack", "bola", 7000, "ngn")
	second := e.runOnce()
	c := ngnCheck(t, second)
	require.Equal(t, base.Difference+7000-pay.Fee, c.Difference)
	require.Equal(t, int64(7000), c.CreditsNotPosted)
	require.Len(t, c.CreditsNotPostedRefs, 1)
	require.Empty(t, balanceMismatches(second), "%+v", second.Disagreements)

	// The ledger posts the credit and the fee, as payout-worker does.
	ref := e.str(`SELECT object_id FROM webhook_events WHERE provider = 'paystack' AND event_type = 'charge.success'`)
	clearing, fees := fixture.System("psp_clearing:paystack"), fixture.System("psp_fees:paystack")
	fixture.Posting{Kind: "credit", Reference: "paystack:" + ref, Currency: "ngn",
		Legs: []fixture.Leg{{Account: clearing, Amount: -7000}, {Account: fixture.User("bola"), Amount: 7000}}}.Insert(t, e.db.Pool)
	fixture.Posting{Kind: "psp_fee", Reference: "paystack:" + ref, Currency: "ngn",
		Legs: []fixture.Leg{{Account: clearing, Amount: pay.Fee}, {Account: fees, Amount: -pay.Fee}}}.Insert(t, e.db.Pool)
	// A payout held here and sent: the PSP's balance pays it at once.
	held := uuid.NewString()
	fixture.Payout{ID: held, UserID: "bola", Amount: 5000, Currency: "ngn", Destination: "RCP_dave", Provider: "paystack",
		Status: payoutstate.Awaiting}.Insert(t, e.db.Pool)
	paystackTransferAt(t, e, held, 5000, "RCP_dave")

	third := e.runOnce()
	c = ngnCheck(t, third)
	require.Equal(t, base.Difference-5000, c.Difference)
	require.Zero(t, c.CreditsNotPosted)
	require.Equal(t, int64(5000), c.PayoutsHeld)
	require.Equal(t, []string{held}, c.PayoutsHeldIDs)
	require.Empty(t, balanceMismatches(third), "%+v", third.Disagreements)

	// Money leaves the PSP's balance for no payout held here.
	paystackTransferAt(t, e, uuid.NewString(), 2000, "RCP_mallory")
	fourth := e.runOnce()
	mismatch := balanceMismatches(fourth)
	require.Len(t, mismatch, 1, "%+v", fourth.Disagreements)
	require.Equal(t, "paystack", mismatch[0].Provider)
	require.Equal(t, "balance:ngn", mismatch[0].PSPObjectID)
	require.Contains(t, mismatch[0].Detail, "moved by -2000 unexplained")
	require.Equal(t, int64(-2000), ngnCheck(t, fourth).Unexplained)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM psp_disagreements WHERE kind = 'balance_mismatch' AND cleared_at IS NULL`))

	fifth := e.runOnce()
	require.Empty(t, balanceMismatches(fifth), "the new difference is the baseline")
	require.Zero(t, e.count(`SELECT count(*) FROM psp_disagreements WHERE kind = 'balance_mismatch' AND cleared_at IS NULL`))
}

// usdCheck is the run's balance comparison of Stripe's usd.
func usdCheck(t *testing.T, r run) pspsync.BalanceCheck {
	t.Helper()
	for _, c := range r.Report["stripe"].Balance {
		if c.Currency == "usd" {
			return c
		}
	}
	t.Fatalf("no usd balance comparison in %+v", r.Report["stripe"])
	return pspsync.BalanceCheck{}
}

// Stripe's fees reach the ledger only when payout-worker's fee collector
// reads them. Until then a credit's fee is kept at Stripe and missing from
// the ledger: the comparison counts the credits posted since the
// collector's cursor as in flight (up to their amount), so the lag pages
// nothing; once the fee is posted and the cursor moved, the difference is
// the baseline's again.
func TestStripeFeesNotCollectedYetAreInFlight(t *testing.T) {
	e := newEnv(t, pspsync.Config{Window: time.Hour, Grace: time.Hour, BalanceTolerance: 10})
	base := usdCheck(t, e.runOnce())

	pay := e.psp.Pay(t, "stripe", "bola", 7000, "usd")
	require.Positive(t, pay.Fee)
	clearing, fees := fixture.System("psp_clearing:stripe"), fixture.System("psp_fees:stripe")
	fixture.Posting{Kind: "credit", Reference: "stripe:" + pay.ID, Currency: "usd",
		Legs: []fixture.Leg{{Account: clearing, Amount: -7000}, {Account: fixture.User("bola"), Amount: 7000}}}.Insert(t, e.db.Pool)
	second := e.runOnce()
	c := usdCheck(t, second)
	require.Equal(t, base.Difference-pay.Fee, c.Difference, "the fee is at Stripe, not in the ledger yet")
	require.Equal(t, int64(7000), c.FeesNotCollected)
	require.Empty(t, balanceMismatches(second), "%+v", second.Disagreements)

	fixture.Posting{Kind: "psp_fee", Reference: "stripe:txn_collected", Currency: "usd",
		Legs: []fixture.Leg{{Account: clearing, Amount: pay.Fee}, {Account: fees, Amount: -pay.Fee}}}.Insert(t, e.db.Pool)
	_, err := e.db.Pool.Exec(t.Context(), `INSERT INTO psp_fee_cursors (provider, read_to) VALUES ('stripe', now() + interval '2 minutes')`)
	require.NoError(t, err)
	third := e.runOnce()
	c = usdCheck(t, third)
	require.Equal(t, base.Difference, c.Difference)
	require.Zero(t, c.FeesNotCollected)
	require.Empty(t, balanceMismatches(third), "%+v", third.Disagreements)
}
