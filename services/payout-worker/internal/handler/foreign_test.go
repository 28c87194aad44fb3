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
// our key's mode (a test-mode event reaching a worker with a live key, an
// event of a connected account) is evidence, not a command: it moves no
// money and is dead-lettered as evidence_mismatch (dlq-admin pages for
// it), while the genuine events after it are applied.
func TestForeignStripeMoneyEventsMoveNoMoney(t *testing.T) {
	t.Parallel()
	testMode := false
	forgeries := map[string]func(e *event.PSPEvent){
		"test mode with a live key": func(e *event.PSPEvent) { e.Livemode = &testMode },
		"connected account":         func(e *event.PSPEvent) { e.Account = "acct_1ConnectedElse" },
	}
	events := map[string]func(w *world) event.PSPEvent{
		"credit": func(w *world) event.PSPEvent { return w.creditEvent("evt_credit_foreign", "pi_foreign", 5000) },
		"refund": func(w *world) event.PSPEvent {
			return w.moneyBackEvent("evt_refund_foreign", event.ActionRefund, "pi_live", ret("re_foreign", 300, event.OutcomeRefunded))
		},
		"dispute": func(w *world) event.PSPEvent {
			return w.moneyBackEvent("evt_dispute_foreign", event.ActionDispute, "pi_live", ret("dp_foreign", 400, event.OutcomeDisputeLost))
		},
	}
	for forgery, forge := range forgeries {
		for kind, build := range events {
			t.Run(kind+", "+forgery, func(t *testing.T) {
				t.Parallel()
				w := setup(t, options{liveKey: true})
				// A genuine live payment, so a foreign refund or dispute of
				// it has something to take back.
				w.credit("evt_pay_live", "pi_live", 1000)
				w.waitProcessed("stripe:evt_pay_live")

				e := build(w)
				forge(&e)
				b, err := json.Marshal(e)
				require.NoError(t, err)
				w.produce(kafkax.TopicWebhookPending, w.user, e.MessageID(), b)
				w.produce(kafkax.TopicWebhookPending, w.user, e.MessageID(), b) // redelivered
				// The genuine refund after it, on the same partition, is
				// applied: the foreign event was handled and stopped nothing.
				w.waitProcessed(w.moneyBack("evt_refund_live", event.ActionRefund, "pi_live", ret("re_live", 100, event.OutcomeRefunded)))

				require.EqualValues(t, 900, w.balance(), "1000 - the genuine refund; the foreign %s moved nothing", kind)
				require.Equal(t, 2, w.count(`SELECT count(*) FROM ledger_transactions`), "the genuine credit and refund only")
				require.Equal(t, 1, w.count(`SELECT count(*) FROM payment_returns`), "the genuine refund only")
				dls := w.deadLetters(kafkax.TopicWebhookPending)
				require.Len(t, dls, 1, "one dead letter, however often it is delivered")
				require.Equal(t, "evidence_mismatch", dls[0][dlq.HeaderErrorClass])
				require.Contains(t, dls[0][dlq.HeaderError], "moves no money")
				require.Eventually(t, func() bool {
					return w.deadLettersCounted(kafkax.TopicWebhookPending, "evidence_mismatch") == 1
				}, 10*time.Second, 20*time.Millisecond)
				require.False(t, w.pagedForDeadLetters(), "dlq-admin pages for dead letters, not the worker")
			})
		}
	}
}
