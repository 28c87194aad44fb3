package handler_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/event/schema"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/psptest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
)

type settlement struct {
	typ, messageID string
	body           []byte
}

// settlements are the aegis.settlements messages in the outbox, oldest
// first, each checked against its schema.
func (w *world) settlements() []settlement {
	w.t.Helper()
	v, err := schema.NewSettlements()
	require.NoError(w.t, err)
	rows, err := w.db.Pool.Query(context.Background(), `SELECT event_type, headers->>'message_id', payload::text
		FROM transaction_outbox WHERE topic = $1 ORDER BY id`, kafkax.TopicSettlements)
	require.NoError(w.t, err)
	defer rows.Close()
	var out []settlement
	for rows.Next() {
		var s settlement
		var body string
		require.NoError(w.t, rows.Scan(&s.typ, &s.messageID, &body))
		s.body = []byte(body)
		require.NoError(w.t, v.Validate(s.body), "%s", body)
		out = append(out, s)
	}
	require.NoError(w.t, rows.Err())
	return out
}

// Every refund or dispute transition is published once, in the posting's
// transaction, whatever duplicates and stale events arrive.
func TestMoneyBackPostingsArePublishedOncePerTransition(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.credit("evt_pay", "pi_1", 1000)
	w.waitProcessed("stripe:evt_pay")

	w.moneyBack("evt_r1", event.ActionRefund, "pi_1", ret("re_1", 200, event.OutcomeRefunded))
	w.moneyBack("evt_r1", event.ActionRefund, "pi_1", ret("re_1", 200, event.OutcomeRefunded))  // redelivered
	w.moneyBack("evt_r1b", event.ActionRefund, "pi_1", ret("re_1", 200, event.OutcomeRefunded)) // same refund, new event
	w.moneyBack("evt_r1f", event.ActionRefund, "pi_1", ret("re_1", 200, event.OutcomeRefundVoid))
	w.moneyBack("evt_r1late", event.ActionRefund, "pi_1", ret("re_1", 200, event.OutcomeRefunded)) // stale
	w.moneyBack("evt_d1", event.ActionDispute, "pi_1", ret("dp_1", 500, event.OutcomeDisputeOpen))
	last := w.moneyBack("evt_d1w", event.ActionDispute, "pi_1", ret("dp_1", 500, event.OutcomeDisputeWon))
	w.waitProcessed(last)
	require.EqualValues(t, 1000, w.balance())

	got := w.settlements()
	var types, ids []string
	for _, s := range got {
		types, ids = append(types, s.typ), append(ids, s.messageID)
	}
	require.Equal(t, []string{string(event.TypeRefundPosted), string(event.TypeRefundReversed), string(event.TypeDisputeOpened), string(event.TypeDisputeWon)}, types)
	require.Equal(t, []string{"stripe:refund:re_1", "stripe:refund_reversal:re_1", "stripe:dispute_hold:dp_1", "stripe:dispute_release:dp_1"}, ids)

	var opened event.ReturnPosted
	require.NoError(t, json.Unmarshal(got[2].body, &opened))
	require.Equal(t, w.user, opened.UserID)
	require.EqualValues(t, 500, opened.Amount)
	require.Zero(t, opened.Owed, "the wallet covered it")
	require.Equal(t, "usd", opened.Currency)
	require.Equal(t, "dp_1", opened.ObjectID)
	require.Equal(t, "pi_1", opened.PaymentReference)
	require.Equal(t, "evt_d1", opened.PSPEventID)
	require.Equal(t, opened.EventID, ids[2], "the payload's event id is the message id")
}

// A payout whose outcome is unknown is not failed: its money is held, so it
// publishes payout.needs_review, never payout.failed.
func TestNeedsReviewPublishesNeedsReviewNotFailed(t *testing.T) {
	t.Parallel()
	w := setup(t, options{maxAttempts: 1, callTimeout: 300 * time.Millisecond})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Timeout: "3s", Next: []psptest.Fault{{Kind: "timeout", Count: 1}}})
	pid := w.createPayout(700, "ba_1", "stripe")
	w.requestPayout(pid, 700, "stripe")
	p := w.waitStatus(pid, payout.NeedsReview, payout.Finalized)
	require.Equal(t, payout.NeedsReview, p.Status, "%+v", p)
	require.EqualValues(t, 4300, w.balance(), "the hold is kept")

	got := w.settlements()
	require.Len(t, got, 1)
	require.Equal(t, string(event.TypePayoutNeedsReview), got[0].typ)
	var o event.PayoutOutcome
	require.NoError(t, json.Unmarshal(got[0].body, &o))
	require.Equal(t, "NEEDS_REVIEW", o.Status)
	require.Equal(t, pid, o.PayoutID)
	require.EqualValues(t, 700, o.Amount)
	require.Equal(t, "payout:"+pid+":NEEDS_REVIEW", o.EventID)
	require.Zero(t, w.count(`SELECT count(*) FROM transaction_outbox WHERE topic = 'aegis.settlements' AND event_type = 'payout.failed'`))
}

// A Connect transfer reversed in parts gives each part back to the wallet
// once, whatever duplicates and late events arrive, and the rest with the
// reversal of the whole: never more than the payout.
func TestATransferReversedInPartsGivesEachPartBackOnce(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	pid := w.createPayout(1500, "acct_1Rev", "stripe")
	w.requestPayout(pid, 1500, "stripe")
	w.waitStatus(pid, payout.Succeeded)
	require.EqualValues(t, 3500, w.balance())

	now := time.Now()
	reversal := func(id string, reversed int64, at time.Time) string {
		e := w.outcomeEvent(id, pid, event.ActionPayoutReversed, at)
		e.Type, e.Reversed = "transfer.reversed", reversed
		w.publishOutcome(e)
		return e.MessageID()
	}
	w.waitProcessed(reversal("evt_rev_500", 500, now.Add(time.Second)))
	require.EqualValues(t, 4000, w.balance(), "the part is back")
	require.Equal(t, payout.Succeeded, w.payout(pid).Status, "the rest stays paid")
	w.waitProcessed(reversal("evt_rev_500_again", 500, now.Add(2*time.Second)))
	w.waitProcessed(reversal("evt_rev_300_late", 300, now.Add(3*time.Second)))
	require.EqualValues(t, 4000, w.balance(), "a total given back already gives nothing more")
	w.waitProcessed(reversal("evt_rev_900", 900, now.Add(4*time.Second)))
	require.EqualValues(t, 4400, w.balance())
	w.waitProcessed(reversal("evt_rev_all", 1500, now.Add(5*time.Second)))
	w.waitStatus(pid, payout.Finalized)
	require.EqualValues(t, 5000, w.balance(), "the whole payout is back, once")
	w.waitProcessed(reversal("evt_rev_all_again", 1500, now.Add(6*time.Second)))
	require.EqualValues(t, 5000, w.balance())
	require.Equal(t, 3, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_return' AND reference LIKE $1 || '%'`, pid))

	var types []string
	var amounts []int64
	for _, s := range w.settlements() {
		var o event.PayoutOutcome
		require.NoError(t, json.Unmarshal(s.body, &o))
		if o.PayoutID == pid {
			types, amounts = append(types, s.typ), append(amounts, o.Amount)
		}
	}
	require.Equal(t, []string{string(event.TypePayoutSucceeded), string(event.TypePayoutPartiallyReversed),
		string(event.TypePayoutPartiallyReversed), string(event.TypePayoutReversed)}, types)
	require.Equal(t, []int64{1500, 500, 400, 600}, amounts, "each event says what it gave back")
}
