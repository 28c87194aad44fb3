package deliver_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/event/schema"
)

// A body that is not a settlements event becomes a dead letter and nothing
// else: no message, no sequence number, no delivery. The next event of the
// same user is stored as usual.
func TestIntakeDeadLettersAnInvalidEventAndNothingElse(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addEndpoint("http://127.0.0.1:1/none", endpointOpts{})
	h.start(h.config(nil), nil, "intake")
	h.produceRaw("lea", []byte(`{"event_id":"bad-1","type":"payout.succeeded","user_id":"lea"}`))
	good := payout("lea", event.TypePayoutSucceeded)
	h.produce(good)
	h.eventually("the valid event stored", 20*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_messages WHERE event_id = $1`, good.EventID) == 1
	})
	if n := h.count(`SELECT count(*) FROM dead_letters WHERE source = 'consumer' AND original_topic = 'aegis.settlements'
	                 AND consumer_group = 'outbound-test' AND error_class = 'permanent' AND payload = $1`,
		[]byte(`{"event_id":"bad-1","type":"payout.succeeded","user_id":"lea"}`)); n != 1 {
		t.Fatalf("%d dead letters of the invalid event, want 1", n)
	}
	if h.count(`SELECT count(*) FROM outbound_messages`) != 1 || h.count(`SELECT count(*) FROM outbound_deliveries`) != 1 ||
		h.count(`SELECT last FROM outbound_user_sequences WHERE user_id = 'lea'`) != 1 ||
		h.count(`SELECT sequence FROM outbound_messages WHERE event_id = $1`, good.EventID) != 1 {
		t.Error("the invalid event left something besides its dead letter")
	}
}

// A known event id (a redelivery, a replay) changes nothing: no sequence
// number, no message, no delivery.
func TestIntakeIgnoresAKnownEventID(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addEndpoint("http://127.0.0.1:1/none", endpointOpts{})
	h.start(h.config(nil), nil, "intake")
	first, second := payout("max", event.TypePayoutSucceeded), payout("max", event.TypePayoutReversed)
	h.produce(first, first, second)
	h.eventually("the second event stored", 20*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_messages WHERE event_id = $1`, second.EventID) == 1
	})
	if h.count(`SELECT count(*) FROM outbound_messages`) != 2 || h.count(`SELECT count(*) FROM outbound_deliveries`) != 2 ||
		h.count(`SELECT last FROM outbound_user_sequences WHERE user_id = 'max'`) != 2 ||
		h.count(`SELECT sequence FROM outbound_messages WHERE event_id = $1`, second.EventID) != 2 {
		t.Error("the redelivered event changed something")
	}
}

// Each user's events are numbered 1..n in topic order, and the stored body
// is the event plus its sequence, still a valid settlements event; the
// record's traceparent is kept for the attempts' spans.
func TestIntakeNumbersEachUsersEventsInTopicOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.start(h.config(nil), nil, "intake")
	users := []string{"nia", "omar", "pia"}
	want := map[string][]string{}
	var events []any
	for i := range 15 {
		e := payout(users[i%len(users)], event.TypePayoutSucceeded)
		want[e.UserID] = append(want[e.UserID], e.EventID)
		events = append(events, e)
	}
	h.produce(events...)
	traced := payout("nia", event.TypePayoutFailed)
	b, _ := json.Marshal(traced)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.kafka.ProduceSync(ctx, &kgo.Record{Key: []byte("nia"), Value: b,
		Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte(tp)}}}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	want["nia"] = append(want["nia"], traced.EventID)
	h.eventually("every event stored", 20*time.Second, func() bool { return h.count(`SELECT count(*) FROM outbound_messages`) == 16 })

	v, err := schema.NewSettlements()
	if err != nil {
		t.Fatal(err)
	}
	for user, ids := range want {
		rows, err := h.db.Pool.Query(t.Context(), `SELECT event_id, sequence, body FROM outbound_messages WHERE user_id = $1 ORDER BY sequence`, user)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var id string
			var seq int64
			var body []byte
			if err := rows.Scan(&id, &seq, &body); err != nil {
				t.Fatal(err)
			}
			got = append(got, id)
			var fields struct {
				EventID  string `json:"event_id"`
				Sequence int64  `json:"sequence"`
			}
			if err := json.Unmarshal(body, &fields); err != nil || fields.Sequence != seq || fields.EventID != id {
				t.Errorf("%s: body %s does not carry sequence %d", id, body, seq)
			}
			if err := v.Validate(body); err != nil {
				t.Errorf("%s: the delivered body is not a settlements event: %v", id, err)
			}
			if int(seq) != len(got) {
				t.Errorf("%s: sequence %d at position %d", id, seq, len(got))
			}
		}
		if !slices.Equal(got, ids) {
			t.Errorf("%s: sequence order %v, topic order %v", user, got, ids)
		}
	}
	var stored string
	if err := h.db.Pool.QueryRow(t.Context(), `SELECT traceparent FROM outbound_messages WHERE event_id = $1`, traced.EventID).Scan(&stored); err != nil || stored != tp {
		t.Errorf("traceparent %q (%v), want %q", stored, err, tp)
	}
}

// Each event fans out to every enabled, undeleted endpoint whose filter
// wants its type: exact types, prefix wildcards, empty for every type.
func TestIntakeFansOutByTypeFilter(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	all, _ := h.addEndpoint("http://127.0.0.1:1/all", endpointOpts{})
	payouts, _ := h.addEndpoint("http://127.0.0.1:1/payouts", endpointOpts{types: []string{"payout.*"}})
	returns, _ := h.addEndpoint("http://127.0.0.1:1/returns", endpointOpts{types: []string{"refund.*", "dispute.won"}})
	disabled, _ := h.addEndpoint("http://127.0.0.1:1/disabled", endpointOpts{})
	deleted, _ := h.addEndpoint("http://127.0.0.1:1/deleted", endpointOpts{})
	if _, err := h.db.Pool.Exec(t.Context(), `UPDATE outbound_endpoints SET enabled = false, disabled_at = now() WHERE id = $1`, disabled); err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.Pool.Exec(t.Context(), `UPDATE outbound_endpoints SET deleted_at = now() WHERE id = $1`, deleted); err != nil {
		t.Fatal(err)
	}
	h.start(h.config(nil), nil, "intake")
	p, rp, do, dw := payout("quinn", event.TypePayoutSucceeded), posting("quinn", event.TypeRefundPosted),
		posting("quinn", event.TypeDisputeOpened), posting("quinn", event.TypeDisputeWon)
	h.produce(p, rp, do, dw)
	h.eventually("every event stored", 20*time.Second, func() bool { return h.count(`SELECT count(*) FROM outbound_messages`) == 4 })
	for ep, want := range map[uuid.UUID][]string{
		all:      {p.EventID, rp.EventID, do.EventID, dw.EventID},
		payouts:  {p.EventID},
		returns:  {rp.EventID, dw.EventID},
		disabled: nil,
		deleted:  nil,
	} {
		rows, err := h.db.Pool.Query(t.Context(), `SELECT m.event_id FROM outbound_deliveries d JOIN outbound_messages m ON m.id = d.message_id
		                                           WHERE d.endpoint_id = $1 AND d.state = 'pending' ORDER BY m.id`, ep)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			got = append(got, id)
		}
		if !slices.Equal(got, want) {
			t.Errorf("endpoint %s: deliveries %v, want %v", ep, got, want)
		}
	}
}
