package handler_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/psptest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/psp"
)

// createConnectedPayout inserts a Stripe payout to connected account
// account's external account external, as webhook-api does.
func (w *world) createConnectedPayout(amount int64, account, external string) string {
	w.t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	return fixture.Payout{ID: id, UserID: w.user, Amount: amount, Destination: account, ExternalAccount: external,
		Provider: "stripe", CorrelationID: "corr-" + id}.Insert(w.t, w.db.Pool)
}

// steps lists the payout's PSP requests as kind:step:outcome.
func (w *world) steps(pid string) []string {
	w.t.Helper()
	return w.attemptRows(pid, `kind || ':' || coalesce(step, '') || ':' || outcome`)
}

func (w *world) transferOf(pid string) string {
	w.t.Helper()
	var tr string
	require.NoError(w.t, w.db.Pool.QueryRow(context.Background(),
		`SELECT coalesce(psp_transfer, '') FROM payouts WHERE id = $1`, pid).Scan(&tr))
	return tr
}

// objectsByKind splits the stand-in's objects for pid into its transfers
// and payouts.
func objectsByKind(objs []psptest.Object) (transfers, payouts []psptest.Object) {
	for _, o := range objs {
		if o.Kind == "transfer" {
			transfers = append(transfers, o)
		} else {
			payouts = append(payouts, o)
		}
	}
	return transfers, payouts
}

// connectedOutcome is the connected account's payout event for pid.
func (w *world) connectedOutcome(eventID, pid, account string, action event.Action) event.PSPEvent {
	w.t.Helper()
	e := w.outcomeEvent(eventID, pid, action, time.Now())
	e.Account = account
	return e
}

// A Stripe payout to a connected account's bank account moves the money
// platform → connected account (a transfer) → its bank (the account's own
// payout, with Stripe-Account), each under its own key and recorded as its
// own step. Only the connected account's events about that payout settle
// it; the transfer's reversal gives the money back once.
func TestConnectedPayoutIsATransferThenTheAccountsPayout(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	const acct = "acct_worker1"
	pid := w.createConnectedPayout(1500, acct, "ba_worker1")
	w.requestPayout(pid, 1500, "stripe")

	p := w.waitStatus(pid, payout.Awaiting)
	transfers, payouts := objectsByKind(w.psp.Objects(t, pid))
	require.Len(t, transfers, 1)
	require.Len(t, payouts, 1)
	require.Equal(t, acct, transfers[0].Destination)
	require.Equal(t, psp.IdempotencyKey(pid), transfers[0].IdempotencyKey)
	require.Equal(t, acct, payouts[0].Account, "paid out on the connected account")
	require.Equal(t, "ba_worker1", payouts[0].Destination)
	require.Equal(t, psp.ConnectedPayoutKey(psp.IdempotencyKey(pid)), payouts[0].IdempotencyKey)
	require.Equal(t, transfers[0].ID, w.transferOf(pid))
	require.Equal(t, payouts[0].ID, p.Reference)
	require.Equal(t, []string{"create:transfer:accepted", "create:connected_payout:accepted"}, w.steps(pid))
	require.EqualValues(t, 3500, w.balance())

	// payout.paid from our own account, or from another connected account,
	// is not this payout's evidence.
	w.publishOutcome(w.connectedOutcome("evt_platform_"+pid, pid, "", event.ActionPayoutPaid))
	w.publishOutcome(w.connectedOutcome("evt_other_"+pid, pid, "acct_someone_else", event.ActionPayoutPaid))
	require.Eventually(t, func() bool {
		return w.count(`SELECT count(*) FROM payout_evidence WHERE payout_id = $1 AND verdict = 'outcome_mismatch'`, pid) == 2
	}, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, payout.Awaiting, w.payout(pid).Status)

	w.publishOutcome(w.connectedOutcome("evt_paid_"+pid, pid, acct, event.ActionPayoutPaid))
	w.waitStatus(pid, payout.Succeeded)
	require.Equal(t, 1, w.postings(pid, "payout_settle"))

	// The platform reverses the transfer: its event names the transfer.
	live := w.live
	rev := event.PSPEvent{Provider: "stripe", EventID: "evt_rev_" + pid, Type: "transfer.reversed",
		Action: event.ActionPayoutReversed, PayoutID: pid, Amount: 1500, Currency: "usd", Reference: transfers[0].ID,
		Reversed: 1500, Livemode: &live, OccurredAt: time.Now().Add(time.Second), Raw: json.RawMessage(`{}`)}
	w.publishOutcome(rev)
	w.waitStatus(pid, payout.Finalized)
	require.EqualValues(t, 5000, w.balance(), "the reversed transfer's money is back, once")
	w.reconcile()
}

// The connected account's payout fails after its transfer: the money is
// in that account's Stripe balance, not ours, so nothing goes back to the
// wallet. The payout waits for a person with its hold kept; the
// operator's replay pays it out again from the connected account (a new
// key), never a second transfer.
func TestConnectedPayoutFailedAfterItsTransferKeepsTheHold(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	const acct = "acct_worker2"
	pid := w.createConnectedPayout(1200, acct, "ba_worker2")
	w.requestPayout(pid, 1200, "stripe")
	p := w.waitStatus(pid, payout.Awaiting)

	w.psp.Settle(t, p.Reference, "failed")
	w.publishOutcome(w.connectedOutcome("evt_failed_"+pid, pid, acct, event.ActionPayoutFailed))
	p = w.waitStatus(pid, payout.NeedsReview)
	require.Equal(t, string(psp.AttentionConnectedPayout), p.Class)
	require.EqualValues(t, 3800, w.balance(), "the hold is kept: the money is at the connected account")
	require.Zero(t, w.postings(pid, "payout_release"))
	letters := w.deadLetters(kafkax.TopicTransactions)
	require.Len(t, letters, 1)

	// The operator replays its dead letter.
	b, _ := json.Marshal(event.PayoutRequested{PayoutID: pid, UserID: w.user, Amount: 1200, Currency: "usd", Provider: "stripe"})
	w.produce(kafkax.TopicTransactions, w.user, "payout:"+pid+":request:replay:1:1", b)
	require.Eventually(t, func() bool {
		_, payouts := objectsByKind(w.psp.Objects(t, pid))
		return len(payouts) == 2
	}, 20*time.Second, 20*time.Millisecond)
	p = w.waitStatus(pid, payout.Awaiting)
	transfers, payouts := objectsByKind(w.psp.Objects(t, pid))
	require.Len(t, transfers, 1, "never a second transfer")
	require.Equal(t, psp.ConnectedPayoutKey(psp.AttemptKey(pid, 1)), payouts[1].IdempotencyKey)
	require.Equal(t, payouts[1].ID, p.Reference)

	w.publishOutcome(w.connectedOutcome("evt_paid_"+pid, pid, acct, event.ActionPayoutPaid))
	w.waitStatus(pid, payout.Succeeded)
	require.EqualValues(t, 3800, w.balance())
	require.Equal(t, 1, w.postings(pid, "payout_settle"))
	w.reconcile()
}

// A worker stopped between the transfer's answer and the connected
// account's payout (the payout's request lost on its way, or executed with
// its answer lost) is resumed a day later, past Stripe's idempotency
// window: the lookup finds the transfer, and the payout alone is sent (or
// the one made is adopted). One transfer, one payout, the wallet debited
// once.
func TestStoppedBetweenTransferAndConnectedPayoutNeverTransfersTwice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		executed bool
	}{
		{"payout request never reached Stripe", false},
		{"payout executed, its answer lost", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := setup(t, options{callTimeout: 30 * time.Second, grace: 100 * time.Millisecond,
				pspEnv: map[string]string{"PSP_IDEMPOTENCY_WINDOW": "1ms"}})
			w.fundWallet(5000)
			w.pspProxy.passCreates.Store(1) // the transfer answers
			if tc.executed {
				w.pspProxy.swallowCreates.Store(1)
			} else {
				w.pspProxy.dropCreates.Store(1)
			}
			pid := w.createConnectedPayout(900, "acct_worker3", "ba_worker3")
			w.requestPayout(pid, 900, "stripe")
			if tc.executed {
				<-w.pspProxy.swallowed
			} else {
				<-w.pspProxy.dropped
			}
			w.stopConsumers()
			require.Equal(t, payout.Sending, w.payout(pid).Status)
			require.NotEmpty(t, w.transferOf(pid), "the transfer is on disk before the payout is on the wire")

			w.clock.advance(25 * time.Hour)
			w.startConsumer()
			p := w.waitStatus(pid, payout.Awaiting, payout.NeedsReview, payout.Failed, payout.Finalized)
			require.Equal(t, payout.Awaiting, p.Status, "%+v", p)
			transfers, payouts := objectsByKind(w.psp.Objects(t, pid))
			require.Len(t, transfers, 1, "never a second transfer")
			require.Len(t, payouts, 1)
			require.Equal(t, payouts[0].ID, p.Reference)
			want := []string{"create:transfer:accepted", "create:connected_payout:unknown", "lookup::found"}
			if !tc.executed {
				want = append(want, "create:connected_payout:accepted")
			}
			require.Equal(t, want, w.steps(pid))
			require.EqualValues(t, 4100, w.balance())
		})
	}
}

// Reversing the transfer of a payout whose connected payout failed brings
// the money back to the platform: the hold is released once and the
// payout ends FAILED → FINALIZED.
func TestReversingTheTransferOfAFailedConnectedPayoutGivesTheMoneyBackOnce(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	const acct = "acct_worker4"
	pid := w.createConnectedPayout(700, acct, "ba_worker4")
	w.requestPayout(pid, 700, "stripe")
	p := w.waitStatus(pid, payout.Awaiting)
	w.psp.Settle(t, p.Reference, "failed")
	w.publishOutcome(w.connectedOutcome("evt_failed_"+pid, pid, acct, event.ActionPayoutFailed))
	w.waitStatus(pid, payout.NeedsReview)
	require.EqualValues(t, 4300, w.balance())

	live := w.live
	for i, id := range []string{"evt_rev_" + pid, "evt_rev_again_" + pid} {
		w.publishOutcome(event.PSPEvent{Provider: "stripe", EventID: id, Type: "transfer.reversed",
			Action: event.ActionPayoutReversed, PayoutID: pid, Amount: 700, Currency: "usd", Reference: w.transferOf(pid),
			Reversed: 700, Livemode: &live, OccurredAt: time.Now().Add(time.Duration(i+1) * time.Second), Raw: json.RawMessage(`{}`)})
	}
	w.waitStatus(pid, payout.Finalized)
	w.waitProcessed("stripe:evt_rev_again_" + pid)
	require.EqualValues(t, 5000, w.balance(), "back once")
	require.Equal(t, 1, w.postings(pid, "payout_release"))
	require.Zero(t, w.postings(pid, "payout_settle"))
	w.reconcile()
}

// A transfer paid when created and reversed within the same second: the
// reversal's event time is whole seconds, earlier than the instant the
// worker recorded the transfer paid. It is not stale: the money comes back.
func TestATransferReversedInTheSecondItWasMadeGivesTheMoneyBack(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	pid := w.createPayout(800, "acct_worker5", "stripe")
	w.requestPayout(pid, 800, "stripe")
	p := w.waitStatus(pid, payout.Succeeded)
	live := w.live
	w.publishOutcome(event.PSPEvent{Provider: "stripe", EventID: "evt_rev_" + pid, Type: "transfer.reversed",
		Action: event.ActionPayoutReversed, PayoutID: pid, Amount: 800, Currency: "usd", Reference: p.Reference,
		Reversed: 800, Livemode: &live, OccurredAt: time.Now().Add(-time.Minute).Truncate(time.Second), Raw: json.RawMessage(`{}`)})
	w.waitStatus(pid, payout.Finalized)
	require.EqualValues(t, 5000, w.balance())
	w.reconcile()
}
