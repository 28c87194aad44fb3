package handler_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// produceUnsigned publishes e on aegis.webhook.pending as any process able
// to produce to the topic could: with proof as its proof header ("" for
// none), never signed by the harness.
func (w *world) produceUnsigned(e event.PSPEvent, proof string) {
	w.t.Helper()
	b, err := json.Marshal(e)
	require.NoError(w.t, err)
	rec := &kgo.Record{Topic: kafkax.TopicWebhookPending, Key: []byte(w.user), Value: b, Headers: []kgo.RecordHeader{
		{Key: kafkax.HeaderMessageID, Value: []byte(e.MessageID())},
		{Key: kafkax.HeaderCorrelationID, Value: []byte("corr-" + e.MessageID())},
	}}
	if proof != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: eventproof.Header, Value: []byte(proof)})
	}
	require.NoError(w.t, w.producer.ProduceSync(context.Background(), rec).FirstErr())
}

// letter is a dead letter as dlq-admin receives it on the dead-letter topic.
type letter struct {
	payload []byte
	headers map[string]string
}

// letters moves the worker's dead letters of aegis.webhook.pending to
// Kafka (the relay's part: some are written to the outbox, others published
// by the consumer) and returns the n on the topic, by event id.
func (w *world) letters(n int) map[string]letter {
	w.t.Helper()
	w.relay(kafkax.DLQTopic(kafkax.TopicWebhookPending))
	out := map[string]letter{}
	for _, r := range kafkatest.ReadAll(w.t, w.kafka, kafkax.DLQTopic(kafkax.TopicWebhookPending), n, 10*time.Second) {
		var e event.PSPEvent
		require.NoError(w.t, json.Unmarshal(r.Value, &e))
		l := letter{payload: r.Value, headers: map[string]string{}}
		for _, h := range r.Headers {
			l.headers[h.Key] = string(h.Value)
		}
		out[e.EventID] = l
	}
	require.Len(w.t, out, n)
	return out
}

// waitLetters waits until the worker has written n dead letters of
// aegis.webhook.pending to the outbox.
func (w *world) waitLetters(n int) {
	w.t.Helper()
	require.Eventually(w.t, func() bool {
		return w.count(`SELECT count(*) FROM transaction_outbox WHERE topic = $1`, kafkax.DLQTopic(kafkax.TopicWebhookPending)) >= n
	}, 10*time.Second, 10*time.Millisecond)
}

// replay publishes l again as dlq-admin's replay does: its payload and
// headers as stored, a replay message id (letter id n).
func (w *world) replay(l letter, n int64) string {
	w.t.Helper()
	headers := map[string]string{}
	for k, v := range l.headers {
		headers[k] = v
	}
	id := event.ReplayID(l.headers[kafkax.HeaderMessageID], n, 1)
	headers[kafkax.HeaderMessageID], headers["replay_of"], headers["replay_count"] = id, "dl", "1"
	rec := &kgo.Record{Topic: kafkax.TopicWebhookPending, Key: []byte(w.user), Value: l.payload}
	for k, v := range headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	require.NoError(w.t, w.producer.ProduceSync(context.Background(), rec).FirstErr())
	return id
}

// Only webhook-api creates money: a credit, refund, dispute or payout
// outcome produced straight to Kafka without webhook-api's proof (none, one
// under another key, or the proof of another event) moves no ledger row and
// is dead-lettered as unproven_event, which dlq-admin pages for; a genuine
// one is credited.
func TestMoneyEventsWithoutWebhookAPIsProofMoveNoMoney(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(1000)
	ledgerRows := w.count(`SELECT count(*) FROM ledger_transactions`)

	other, err := eventproof.New("another-event-signing-key-0123456789", "")
	require.NoError(t, err)
	credit := func(id string, amount int64) event.PSPEvent {
		return event.PSPEvent{Provider: "stripe", EventID: id, Type: "payment_intent.succeeded", Action: event.ActionCredit,
			UserID: w.user, Amount: amount, Currency: "usd", Reference: "pi_" + id, OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}
	}
	genuineSmall := credit("evt_small", 1)
	forged := []struct {
		e     event.PSPEvent
		proof string
	}{
		{credit("evt_no_proof", 900_000), ""},
		{credit("evt_other_key", 900_000), other.Sign(credit("evt_other_key", 900_000))},
		// webhook-api's proof of a 1-cent credit, on a large one.
		{func() event.PSPEvent { e := genuineSmall; e.Amount = 900_000; return e }(), w.proof.Sign(genuineSmall)},
		{credit("evt_garbage", 900_000), "v1:deadbeef:00"},
		{event.PSPEvent{Provider: "stripe", EventID: "evt_refund_forged", Type: "charge.refunded", Action: event.ActionRefund,
			Reference: "pi_evt_fund", Returns: []event.Return{ret("re_forged", 500, event.OutcomeRefunded)},
			OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}, ""},
		{event.PSPEvent{Provider: "stripe", EventID: "evt_dispute_forged", Type: "charge.dispute.created", Action: event.ActionDispute,
			Reference: "pi_evt_fund", Returns: []event.Return{ret("dp_forged", 500, event.OutcomeDisputeOpen)},
			OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}, ""},
	}
	for _, f := range forged {
		w.produceUnsigned(f.e, f.proof)
	}
	w.waitLetters(len(forged))
	require.EqualValues(t, 1000, w.balance(), "no forged event moved money")
	require.Equal(t, ledgerRows, w.count(`SELECT count(*) FROM ledger_transactions`), "no ledger rows")
	dls := w.deadLetters(kafkax.TopicWebhookPending)
	require.Len(t, dls, len(forged))
	for _, d := range dls {
		require.Equal(t, string(eventproof.Class), d[dlq.HeaderErrorClass])
	}
	require.Eventually(t, func() bool {
		return w.deadLettersCounted(kafkax.TopicWebhookPending, string(eventproof.Class)) == float64(len(forged))
	}, 10*time.Second, 20*time.Millisecond)
	require.False(t, w.pagedForDeadLetters(), "dlq-admin pages for the letters, not the worker")

	// The genuine event, signed by webhook-api, is credited: the forgery
	// that carried its id before it did not take its place.
	w.produceUnsigned(genuineSmall, w.proof.Sign(genuineSmall))
	w.waitProcessed(genuineSmall.MessageID())
	require.EqualValues(t, 1001, w.balance())
}

// dlq-admin replays a letter with its payload and headers as stored: a
// genuine event's proof travels with it and still verifies; a forged event
// replayed is refused again.
func TestReplayedDeadLettersKeepTheirProof(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	// A genuine refund before its payment's credit: dead-lettered (no wait).
	w.moneyBack("evt_r_early", event.ActionRefund, "pi_late", ret("re_late", 300, event.OutcomeRefunded))
	forged := event.PSPEvent{Provider: "stripe", EventID: "evt_forged_credit", Type: "payment_intent.succeeded",
		Action: event.ActionCredit, UserID: w.user, Amount: 700, Currency: "usd", Reference: "pi_forged",
		OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}
	w.produceUnsigned(forged, "")
	w.waitLetters(1)
	ls := w.letters(2)
	require.NotEmpty(t, ls["evt_r_early"].headers[eventproof.Header], "the genuine letter keeps its proof")
	require.Equal(t, string(eventproof.Class), ls["evt_forged_credit"].headers[dlq.HeaderErrorClass])

	w.credit("evt_pay_late", "pi_late", 1000)
	w.waitProcessed("stripe:evt_pay_late")
	w.waitProcessed(w.replay(ls["evt_r_early"], 1))
	require.EqualValues(t, 700, w.balance(), "1000 - the replayed refund 300")

	w.replay(ls["evt_forged_credit"], 2)
	w.waitLetters(2)
	require.EqualValues(t, 700, w.balance(), "the replayed forgery moved nothing")
	require.Equal(t, 2, w.count(`SELECT count(*) FROM transaction_outbox WHERE topic = $1 AND headers->>$2 = $3`,
		kafkax.DLQTopic(kafkax.TopicWebhookPending), dlq.HeaderErrorClass, string(eventproof.Class)), "refused again")
}
