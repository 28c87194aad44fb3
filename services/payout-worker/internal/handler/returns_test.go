package handler_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
)

// moneyBack publishes a refund or dispute event as webhook-api would.
func (w *world) moneyBack(eventID string, action event.Action, payment string, returns ...event.Return) string {
	w.t.Helper()
	e := w.moneyBackEvent(eventID, action, payment, returns...)
	b, _ := json.Marshal(e)
	w.produce(kafkax.TopicWebhookPending, w.user, e.MessageID(), b)
	return e.MessageID()
}

// moneyBackEvent is the event moneyBack publishes, for a test to alter.
func (w *world) moneyBackEvent(eventID string, action event.Action, payment string, returns ...event.Return) event.PSPEvent {
	live := w.live
	return event.PSPEvent{Provider: "stripe", EventID: eventID, Type: string(action), Action: action,
		Reference: payment, Returns: returns, Livemode: &live, OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}
}

func ret(id string, amount int64, outcome string) event.Return {
	return event.Return{ID: id, Amount: amount, Currency: "usd", Outcome: outcome}
}

func TestRefundsAndDisputesMoveTheLedgerOncePerObjectInAnyOrder(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.credit("evt_pay", "pi_1", 1000)
	w.waitProcessed("stripe:evt_pay")

	w.moneyBack("evt_r1", event.ActionRefund, "pi_1", ret("re_1", 200, event.OutcomeRefunded))
	w.moneyBack("evt_r1", event.ActionRefund, "pi_1", ret("re_1", 200, event.OutcomeRefunded)) // redelivered
	w.moneyBack("evt_r1u", event.ActionRefund, "pi_1", ret("re_1", 200, event.OutcomeRefunded))
	// charge.dispute.closed (lost) overtakes charge.dispute.created.
	w.moneyBack("evt_d1c", event.ActionDispute, "pi_1", ret("dp_1", 300, event.OutcomeDisputeLost))
	last := w.moneyBack("evt_d1o", event.ActionDispute, "pi_1", ret("dp_1", 300, event.OutcomeDisputeOpen))
	w.waitProcessed(last)

	require.EqualValues(t, 500, w.balance(), "1000 - refund 200 - lost dispute 300")
	require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'refund'`))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'dispute_hold'`))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'dispute_loss'`))
	require.Zero(t, w.count(`SELECT coalesce(sum(e.amount), 0) FROM ledger_entries e JOIN wallets a ON a.id = e.wallet_id
		WHERE a.kind = 'system' AND a.owner = 'disputes'`), "a closed dispute holds nothing")
	require.Empty(t, w.deadLetters(kafkax.TopicWebhookPending))
}

func TestRefundBeyondThePaymentOrOfAnUncreditedPaymentIsDeadLetteredAndMovesNothing(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.credit("evt_pay", "pi_1", 1000)
	w.waitProcessed("stripe:evt_pay")
	w.moneyBack("evt_big", event.ActionRefund, "pi_1", ret("re_big", 1001, event.OutcomeRefunded))
	early := w.moneyBack("evt_early", event.ActionRefund, "pi_2", ret("re_2", 10, event.OutcomeRefunded))

	recs := kafkatest.ReadAll(t, w.kafka, kafkax.DLQTopic(kafkax.TopicWebhookPending), 2, 10*time.Second)
	require.Len(t, recs, 2)
	require.Equal(t, "permanent", kafkax.Header(recs[0], dlq.HeaderErrorClass))
	require.Contains(t, kafkax.Header(recs[0], dlq.HeaderError), "exceeds what is left of the payment")
	require.Contains(t, kafkax.Header(recs[1], dlq.HeaderError), "never credited")
	require.EqualValues(t, 1000, w.balance())
	require.Zero(t, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'refund'`))
	require.Zero(t, w.count(`SELECT count(*) FROM payment_returns`))
	require.Eventually(t, func() bool { return w.deadLettersCounted(kafkax.TopicWebhookPending, "permanent") == 2.0 }, 10*time.Second, 20*time.Millisecond)
	require.False(t, w.pagedForDeadLetters(), "dlq-admin pages for dead letters, not the worker")

	// The refund overtook its payment's credit. Once the credit is in, the
	// dead letter's replay (the same message again) is applied.
	w.credit("evt_pay2", "pi_2", 500)
	w.waitProcessed("stripe:evt_pay2")
	w.moneyBack("evt_early", event.ActionRefund, "pi_2", ret("re_2", 10, event.OutcomeRefunded))
	w.waitProcessed(early)
	require.EqualValues(t, 1490, w.balance())
}

func TestRefundTheWalletCannotCoverBecomesAReceivableThatBlocksPayoutsAndIsAlerted(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.credit("evt_pay", "pi_1", 1000)
	w.waitProcessed("stripe:evt_pay")
	pid := w.createPayout(800, "acct_ok", "stripe")
	w.requestPayout(pid, 800, "stripe")
	w.waitStatus(pid, payout.Awaiting, payout.Succeeded)

	last := w.moneyBack("evt_r", event.ActionRefund, "pi_1", ret("re_1", 1000, event.OutcomeRefunded))
	w.waitProcessed(last)
	require.Zero(t, w.balance(), "never negative")
	require.Equal(t, 800, w.count(`SELECT owed FROM wallets WHERE kind = 'user' AND owner = $1`, w.user))
	require.Eventually(t, func() bool { return w.hasAlert("receivable:" + w.user) }, 5*time.Second, 20*time.Millisecond,
		"the alert names the user")
	// What pages is the condition: a user owes (AegisReceivableOpen on
	// aegis_receivables_open, read from Postgres at each scrape on every
	// replica).
	require.Equal(t, 1.0, w.gaugeSum(payout.MetricReceivablesOpen), "one user owes")

	blocked := w.createPayout(1, "acct_ok", "stripe")
	w.requestPayout(blocked, 1, "stripe")
	p := w.waitStatus(blocked, payout.Finalized)
	require.Contains(t, p.LastError, "wallet blocked")

	w.credit("evt_pay2", "pi_2", 500)
	w.waitProcessed("stripe:evt_pay2")
	require.Zero(t, w.balance(), "the credit repaid the receivable first")
	require.Equal(t, 300, w.count(`SELECT owed FROM wallets WHERE kind = 'user' AND owner = $1`, w.user))
	require.Equal(t, -300, w.count(`SELECT coalesce(sum(e.amount), 0)::int FROM ledger_entries e JOIN wallets a ON a.id = e.wallet_id
		WHERE a.kind = 'system' AND a.owner = 'receivables'`))
	require.Equal(t, 1.0, w.gaugeSum(payout.MetricReceivablesOpen), "still owes 300")

	// Repaid in full: the condition resolves by itself.
	w.credit("evt_pay3", "pi_3", 300)
	w.waitProcessed("stripe:evt_pay3")
	require.Zero(t, w.count(`SELECT owed FROM wallets WHERE kind = 'user' AND owner = $1`, w.user))
	require.Equal(t, 0.0, w.gaugeSum(payout.MetricReceivablesOpen), "nobody owes: AegisReceivableOpen resolves")
}

// gaugeSum adds up every series of the gauge name on the world's registry
// (0 when it has none).
func (w *world) gaugeSum(name string) float64 {
	w.t.Helper()
	families, err := w.reg.Gather()
	require.NoError(w.t, err)
	sum := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func TestPayoutOfCreditsInsideTheSettlementDelayIsRefused(t *testing.T) {
	t.Parallel()
	w := setup(t, options{settlementDelay: time.Hour})
	w.credit("evt_pay", "pi_1", 1000)
	w.waitProcessed("stripe:evt_pay")
	require.EqualValues(t, 1000, w.balance(), "credited at once")
	pid := w.createPayout(500, "acct_ok", "stripe")
	w.requestPayout(pid, 500, "stripe")
	p := w.waitStatus(pid, payout.Finalized)
	require.Contains(t, p.LastError, "funds not yet available")
	require.EqualValues(t, 1000, w.balance(), "nothing held")
	require.Empty(t, w.attempts(pid), "the PSP was never called")
}

// moneyBackKeyed publishes a refund or dispute under key: webhook-api keys
// one whose payment is not credited yet by the payment (it has no wallet).
func (w *world) moneyBackKeyed(key, eventID string, action event.Action, payment string, returns ...event.Return) string {
	w.t.Helper()
	e := w.moneyBackEvent(eventID, action, payment, returns...)
	b, _ := json.Marshal(e)
	w.produce(kafkax.TopicWebhookPending, key, e.MessageID(), b)
	return e.MessageID()
}

// A refund that arrives before its payment's credit is not dead-lettered
// at once: it is claimed and published again, delayed, through the outbox
// (MONEY_BACK_CREDIT_WAIT), and the copy is applied once the credit is in.
// One whose wait is spent is dead-lettered, saying so, and moves nothing.
func TestMoneyBackBeforeItsCreditWaitsForItAndIsDeadLetteredOnlyWhenTheWaitIsSpent(t *testing.T) {
	t.Parallel()
	w := setup(t, options{creditWait: time.Minute})
	early := w.moneyBackKeyed("stripe:pi_late", "evt_r_early", event.ActionRefund, "pi_late", ret("re_early", 100, event.OutcomeRefunded))
	w.waitProcessed(early) // claimed: its delayed copy carries it on
	var (
		copyID, key, since string
		payload            []byte
		headers            map[string]string
		delayed            bool
	)
	require.NoError(t, w.db.Pool.QueryRow(context.Background(), `
		SELECT headers->>'message_id', partition_key, headers->>'credit_wait_since', payload, headers, next_retry_at > now()
		FROM transaction_outbox WHERE topic = $1 AND headers->>'credit_wait_of' = $2`, kafkax.TopicWebhookPending, early).
		Scan(&copyID, &key, &since, &payload, &headers, &delayed))
	require.Equal(t, early+"#credit-wait-1", copyID)
	require.Equal(t, "credit-wait:stripe:pi_late", key, "holds back no other record")
	require.NotEmpty(t, since)
	require.True(t, delayed, "published later, not at once")
	require.EqualValues(t, 1, testutil.ToFloat64(w.moneyBackCounter("refund", "waiting_for_credit")))
	require.Empty(t, w.deadLetters(kafkax.TopicWebhookPending), "not dead-lettered")
	require.Zero(t, w.count(`SELECT count(*) FROM payment_returns`))

	// Delivered again before the credit, the copy waits once more under the
	// same key, counting from the first delivery.
	w.produceRecord(kafkax.TopicWebhookPending, key, payload, headers)
	w.waitProcessed(copyID)
	var key2, since2 string
	require.NoError(t, w.db.Pool.QueryRow(context.Background(), `
		SELECT partition_key, headers->>'credit_wait_since' FROM transaction_outbox
		WHERE topic = $1 AND headers->>'message_id' = $2`, kafkax.TopicWebhookPending, early+"#credit-wait-2").Scan(&key2, &since2))
	require.Equal(t, key, key2)
	require.Equal(t, since, since2)
	copyID = early + "#credit-wait-2"
	headers["message_id"] = copyID
	headers["credit_wait_attempt"] = "2"

	w.credit("evt_pay_late", "pi_late", 1000)
	w.waitProcessed("stripe:evt_pay_late")
	// The relay publishes the copy when it is due.
	w.produceRecord(kafkax.TopicWebhookPending, key, payload, headers)
	w.waitProcessed(copyID)
	require.EqualValues(t, 900, w.balance(), "1000 - refund 100")
	require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'refund'`))
	require.Empty(t, w.deadLetters(kafkax.TopicWebhookPending))

	// The wait spent: dead-lettered with the reason, nothing moved.
	spent := map[string]string{"credit_wait_since": time.Now().Add(-2 * time.Minute).UTC().Format(time.RFC3339Nano),
		"credit_wait_of": "stripe:evt_r_never", "credit_wait_attempt": "6", kafkax.HeaderMessageID: "stripe:evt_r_never#credit-wait-6"}
	e := event.PSPEvent{Provider: "stripe", EventID: "evt_r_never", Type: "refund", Action: event.ActionRefund,
		Reference: "pi_never", Returns: []event.Return{ret("re_never", 10, event.OutcomeRefunded)}, OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}
	b, _ := json.Marshal(e)
	w.produceRecord(kafkax.TopicWebhookPending, "credit-wait:stripe:pi_never", b, spent)
	recs := kafkatest.ReadAll(t, w.kafka, kafkax.DLQTopic(kafkax.TopicWebhookPending), 1, 20*time.Second)
	require.Len(t, recs, 1)
	require.Equal(t, "permanent", kafkax.Header(recs[0], dlq.HeaderErrorClass))
	require.Contains(t, kafkax.Header(recs[0], dlq.HeaderError), "never credited")
	require.Contains(t, kafkax.Header(recs[0], dlq.HeaderError), "waited MONEY_BACK_CREDIT_WAIT 1m0s")
	require.EqualValues(t, 900, w.balance(), "moved nothing")
	require.Zero(t, w.count(`SELECT count(*) FROM payment_returns WHERE object_id = 're_never'`))
}

// produceRecord publishes value with exactly headers (as the relay does).
func (w *world) produceRecord(topic, key string, value []byte, headers map[string]string) {
	w.t.Helper()
	rec := &kgo.Record{Topic: topic, Key: []byte(key), Value: value}
	for k, v := range headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	w.sign(rec)
	require.NoError(w.t, w.producer.ProduceSync(context.Background(), rec).FirstErr())
}

// moneyBackCounter is aegis_money_back_total{provider="stripe",kind,result}.
func (w *world) moneyBackCounter(kind, result string) prometheus.Collector {
	w.t.Helper()
	mfs, err := w.reg.Gather()
	require.NoError(w.t, err)
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "aegis_money_back_total_view"})
	for _, mf := range mfs {
		if mf.GetName() != "aegis_money_back_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["provider"] == "stripe" && labels["kind"] == kind && labels["result"] == result {
				g.Set(m.GetCounter().GetValue())
			}
		}
	}
	return g
}

// pspCalls is how many calls aegis_psp_call_seconds timed for provider,
// operation and result.
func (w *world) pspCalls(provider, operation, result string) uint64 {
	w.t.Helper()
	mfs, err := w.reg.Gather()
	require.NoError(w.t, err)
	for _, mf := range mfs {
		if mf.GetName() != "aegis_psp_call_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["provider"] == provider && labels["operation"] == operation && labels["result"] == result {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}
