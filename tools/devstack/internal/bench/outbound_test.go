package bench

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/aegis-payments/aegis/pkg/event/schema"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbound"
)

// The outbound scenario's events are valid settlements events (the intake
// dead-letters anything else), on aegis.settlements, each with its own
// event id.
func TestSettlementMessagesAreValidSettlementsEvents(t *testing.T) {
	t.Parallel()
	v, err := schema.NewSettlements()
	if err != nil {
		t.Fatal(err)
	}
	seq := 0
	msgs := settlementMessages(50, &seq)
	if seq != 50 {
		t.Fatalf("seq %d after 50 messages", seq)
	}
	ids := map[string]bool{}
	for _, m := range msgs {
		if err := v.Validate(m.Payload); err != nil {
			t.Fatalf("%s: %v", m.Payload, err)
		}
		if m.Topic != kafkax.TopicSettlements || eventIDOf(m) == "" || ids[eventIDOf(m)] {
			t.Fatalf("message on %s with event id %q (seen before: %t)", m.Topic, eventIDOf(m), ids[eventIDOf(m)])
		}
		ids[eventIDOf(m)] = true
	}
}

// The scenario's receiver counts a delivery signed under its secret once
// per webhook-id (again: a duplicate) and refuses one signed under another.
func TestOutboundReceiverCountsVerifiedDeliveriesOnce(t *testing.T) {
	t.Parallel()
	secret, err := outbound.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	other, err := outbound.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	rc := &outboundReceiver{wh: wh, arrived: map[string]time.Time{}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	post := func(key, id string) int {
		t.Helper()
		body := []byte(`{"event_id":"` + id + `"}`)
		signer, err := outbound.NewSigner(key)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		for h, v := range signer.Headers(id, time.Now(), body) {
			req.Header.Set(h, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		key, id string
		want    int
	}{{secret, "e1", 200}, {secret, "e1", 200}, {secret, "e2", 200}, {other, "e3", 401}} {
		if got := post(c.key, c.id); got != c.want {
			t.Errorf("%s: %d, want %d", c.id, got, c.want)
		}
	}
	n, _ := rc.count()
	if _, ok := rc.arrival("e3"); n != 2 || ok || rc.duplicates != 1 || rc.unverified != 1 {
		t.Fatalf("%d events, e3 arrived %t, %d duplicates, %d unverified; want 2, false, 1, 1", n, ok, rc.duplicates, rc.unverified)
	}
}
