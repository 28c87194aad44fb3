package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// docs/guides/money-back.md's case for MONEY_BACK_CREDIT_WAIT, with the defaults the
// services ship: a refund arrives before its payment's credit because the
// payment's webhook was lost, and the PSP reconciliation recovers the
// payment at the latest moment it can (the next scheduled run, at most
// PSP_RECONCILE_INTERVAL later, running its longest). The refund waits
// for it and ends applied: credited, then refunded, with no dead letter.
// Time is the worker's injected clock; the test plays the relay, which
// publishes each delayed copy when it is due.
func TestRefundOfAPaymentTheReconciliationRecoversIsAppliedAfterItsCredit(t *testing.T) {
	t.Parallel()
	env := config.New(func(string) string { return "" })
	timing := env.MoneyBackTiming()
	require.NoError(t, env.Err())
	wait := timing.CreditWait
	w := setup(t, options{creditWait: wait})
	// The latest the recovered payment's credit can arrive.
	recoveredAt := timing.ReconcileInterval + timing.ReconcileRunTimeout

	first := w.moneyBackKeyed("stripe:pi_lost", "evt_refund_early", event.ActionRefund, "pi_lost",
		ret("re_early", 400, event.OutcomeRefunded))
	w.waitProcessed(first)
	start := w.clock.now()
	credited := false
	for copies := 0; ; copies++ {
		require.Less(t, copies, 100, "the wait re-publishes a bounded number of copies")
		id, due := w.creditWaitCopy(first)
		if !credited && due.Sub(start) >= recoveredAt {
			// The reconciliation's run recovers the payment: its credit
			// comes through the outbox like any webhook's.
			w.credit("evt_pay_recovered", "pi_lost", 1000)
			w.waitProcessed("stripe:evt_pay_recovered")
			require.EqualValues(t, 1000, w.balance())
			credited = true
		}
		if ahead := due.Sub(w.clock.now()); ahead > 0 {
			w.clock.advance(ahead)
		}
		require.Equal(t, 1, w.relay(kafkax.TopicWebhookPending))
		w.waitHandled(id)
		require.Zero(t, testutil.ToFloat64(w.moneyBackCounter("refund", "refused")),
			"refund dead-lettered after waiting %s of MONEY_BACK_CREDIT_WAIT %s: the reconciliation recovers its payment by %s",
			w.clock.now().Sub(start).Round(time.Second), wait, recoveredAt)
		if credited {
			break
		}
	}
	require.EqualValues(t, 600, w.balance(), "credited 1000, then refunded 400")
	require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'refund'`))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM payment_returns WHERE object_id = 're_early' AND state = 'refunded'`))
	require.Zero(t, w.count(`SELECT count(*) FROM transaction_outbox WHERE topic = $1`, kafkax.DLQTopic(kafkax.TopicWebhookPending)))
	require.Zero(t, w.deadLettersCounted(kafkax.TopicWebhookPending, "permanent"), "no dead letter")
}

// creditWaitCopy is the pending delayed copy of the refund first delivered
// as first: its message id and when the relay publishes it.
func (w *world) creditWaitCopy(first string) (string, time.Time) {
	w.t.Helper()
	var id string
	var due time.Time
	require.NoError(w.t, w.db.Pool.QueryRow(context.Background(), `
		SELECT headers->>'message_id', next_retry_at FROM transaction_outbox
		WHERE topic = $1 AND status = 'pending' AND headers->>'credit_wait_of' = $2`,
		kafkax.TopicWebhookPending, first).Scan(&id, &due))
	return id, due
}

// waitHandled waits until the consumer processed messageID or refused a
// refund (which the consumer dead-letters without claiming it).
func (w *world) waitHandled(messageID string) {
	w.t.Helper()
	require.Eventually(w.t, func() bool {
		var ok bool
		_ = w.db.Pool.QueryRow(context.Background(),
			`SELECT EXISTS (SELECT 1 FROM processed_events WHERE consumer_group = $1 AND event_id = $2)
				OR EXISTS (SELECT 1 FROM ledger_transactions WHERE kind = 'credit' AND message_id = $2)`, group, messageID).Scan(&ok)
		return ok || testutil.ToFloat64(w.moneyBackCounter("refund", "refused")) > 0
	}, 20*time.Second, 20*time.Millisecond, "message %s never handled", messageID)
}
