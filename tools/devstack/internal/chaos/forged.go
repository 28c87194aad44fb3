package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// Kinds of forged money events (the week profile sends a few of each).
const (
	// forgedLivemode: a correctly signed payment_intent.succeeded whose
	// livemode disagrees with the configured key (the run's key is a test
	// key; the event says live).
	forgedLivemode = "livemode_mismatch"
	// forgedConnect: a correctly signed payment_intent.succeeded from a
	// Connect account (account: acct_…), not our own.
	forgedConnect = "connect_account"
	// forgedKafka: a credit produced straight to aegis.webhook.pending,
	// never through webhook-api.
	forgedKafka = "kafka_forged_credit"
)

// forgedUser is the wallet forged events claim to pay: apart from the
// workload's users, so invariant 1 (credits per wallet) leaves it to
// invariant 10.
const forgedUser = "chaos-forged"

// forgedEvent is one forged money event and what it was answered.
type forgedEvent struct {
	Kind, EventID, User string
	// Payment is the payment id the event claims; no ledger row may name it.
	Payment string
	Amount  int64
	// Status is webhook-api's answer (0 for Kafka forgeries).
	Status int
	Err    string
}

// sendForged sends each kind of forged event count times.
func (w *workload) sendForged(ctx context.Context, kafkaAddr string, count int) {
	for i := range count {
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		w.seq++
		n := w.seq
		w.mu.Unlock()
		user := forgedUser
		amount := int64(1000 + 100*i)
		for _, kind := range []string{forgedLivemode, forgedConnect} {
			pi := fmt.Sprintf("pi_forged_%s_%d", kind, n)
			id := fmt.Sprintf("evt_forged_%s_%d", kind, n)
			obj := fmt.Sprintf(`{"id":%q,"object":"payment_intent","amount":%d,"amount_received":%d,"currency":"usd","status":"succeeded","metadata":{"user_id":%q}}`,
				pi, amount, amount, user)
			extra := `"livemode":true`
			if kind == forgedConnect {
				extra = `"livemode":false,"account":"acct_chaos_connected"`
			}
			body := []byte(fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2024-06-20","created":%d,"type":"payment_intent.succeeded","data":{"object":%s},%s}`,
				id, time.Now().Unix(), obj, extra))
			w.addForged(forgedEvent{Kind: kind, EventID: id, User: user, Payment: pi, Amount: amount, Status: w.sendStripe(body)})
		}
		pi := fmt.Sprintf("pi_forged_%s_%d", forgedKafka, n)
		f := forgedEvent{Kind: forgedKafka, EventID: fmt.Sprintf("evt_forged_%s_%d", forgedKafka, n), User: user, Payment: pi, Amount: amount}
		if err := produceForged(ctx, kafkaAddr, f); err != nil {
			f.Err = err.Error()
		}
		w.addForged(f)
	}
}

func (w *workload) addForged(f forgedEvent) {
	w.mu.Lock()
	w.forged = append(w.forged, f)
	w.sent["forged_"+f.Kind]++
	w.mu.Unlock()
}

// produceForged writes a credit to aegis.webhook.pending as webhook-api's
// relay would, without webhook-api: whoever can produce to the topic.
func produceForged(ctx context.Context, kafkaAddr string, f forgedEvent) error {
	livemode := false
	ev := event.PSPEvent{Provider: "stripe", EventID: f.EventID, Type: "payment_intent.succeeded", Action: event.ActionCredit,
		UserID: f.User, Amount: f.Amount, Currency: "usd", Reference: f.Payment, Livemode: &livemode,
		OccurredAt: time.Now().UTC(), Raw: json.RawMessage(`{}`)}
	value, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr))
	if err != nil {
		return err
	}
	defer cl.Close()
	rec := &kgo.Record{Topic: kafkax.TopicWebhookPending, Key: []byte(f.User), Value: value, Headers: []kgo.RecordHeader{
		{Key: kafkax.HeaderMessageID, Value: []byte("stripe:" + f.EventID)},
		{Key: kafkax.HeaderEventType, Value: []byte(ev.Type)},
	}}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return cl.ProduceSync(pctx, rec).FirstErr()
}
