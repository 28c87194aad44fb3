package handler_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// A Stripe credit, refund or dispute that is not about our own money in
// our key's mode (a test-mode event reaching a live worker, an event of a
// connected account) is evidence, not a command: it moves no money, and
// is dead-lettered as evidence_mismatch (dlq-admin pages for it), while
// the genuine events around it are applied.
func TestForeignStripeMoneyEventsMoveNoMoney(t *testing.T) {
	t.Parallel()
	w := setup(t, options{liveKey: true})
	// A genuine live payment, so a foreign refund or dispute of it would
	// have something to take back.
	w.credit("evt_pay_live", "pi_live", 1000)
	w.waitProcessed("stripe:evt_pay_live")
	require.EqualValues(t, 1000, w.balance())

	testMode := false
	foreign := map[string]func(e *event.PSPEvent){
		"test mode": func(e *event.PSPEvent) { e.Livemode = &testMode },
		"account":   func(e *event.PSPEvent) { e.Account = "acct_1ConnectedElse" },
	}
	var ids []string
	for name, forge := range foreign {
		credit := w.creditEvent("evt_credit_"+name, "pi_foreign_"+name, 5000)
		refund := w.moneyBackEvent("evt_refund_"+name, event.ActionRefund, "pi_live", ret("re_"+name, 300, event.OutcomeRefunded))
		dispute := w.moneyBackEvent("evt_dispute_"+name, event.ActionDispute, "pi_live", ret("dp_"+name, 400, event.OutcomeDisputeLost))
		for _, e := range []event.PSPEvent{credit, refund, dispute} {
			forge(&e)
			b, err := json.Marshal(e)
			require.NoError(t, err)
			w.produce(kafkax.TopicWebhookPending, w.user, e.MessageID(), b)
			ids = append(ids, e.MessageID())
		}
	}
	for _, id := range ids {
		w.waitProcessed(id)
	}

	require.EqualValues(t, 1000, w.balance(), "no foreign event moved money")
	require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions`), "only the genuine credit is posted")
	require.Zero(t, w.count(`SELECT count(*) FROM payment_returns`))
	dls := w.deadLetters(kafkax.TopicWebhookPending)
	require.Len(t, dls, len(ids))
	for _, d := range dls {
		require.Equal(t, "evidence_mismatch", d[dlq.HeaderErrorClass])
		require.Contains(t, d[dlq.HeaderError], "moves no money")
	}
	require.Eventually(t, func() bool {
		return w.deadLettersCounted(kafkax.TopicWebhookPending, "evidence_mismatch") == float64(len(ids))
	}, 10*time.Second, 20*time.Millisecond)
	require.False(t, w.pagedForDeadLetters(), "dlq-admin pages for dead letters, not the worker")

	// Redelivered, a refused event is neither applied nor lettered again.
	for name, forge := range foreign {
		e := w.creditEvent("evt_credit_"+name, "pi_foreign_"+name, 5000)
		forge(&e)
		b, _ := json.Marshal(e)
		w.produce(kafkax.TopicWebhookPending, w.user, e.MessageID(), b)
	}
	// The genuine refund after them is applied: the partition kept going.
	last := w.moneyBack("evt_refund_live", event.ActionRefund, "pi_live", ret("re_live", 100, event.OutcomeRefunded))
	w.waitProcessed(last)
	require.EqualValues(t, 900, w.balance())
	require.Len(t, w.deadLetters(kafkax.TopicWebhookPending), len(ids))
}
