package deliver_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/outbound"
)

// Done-when, an hour to a second: endpoint A is down (503) for "6 hours"
// while events keep coming; B, up throughout, gets each event promptly.
// Once A is back, each endpoint has verified every event (the Standard
// Webhooks library) exactly once per webhook-id after dedupe, every
// delivery succeeded and every attempt is logged.
func TestAnEndpointDownForHoursGetsEveryEventAfterwardsWhileAnotherGetsThemAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var aUp atomic.Bool
	a := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		if !aUp.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	b := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) })
	aID, aSecret := h.addEndpoint(a.srv.URL+"/hooks?token=a", endpointOpts{})
	_, bSecret := h.addEndpoint(b.srv.URL+"/hooks", endpointOpts{})
	h.start(h.config(nil), nil, "intake", "dispatch")

	var ids []string
	down := time.Now()
	for i := 0; time.Since(down) < 6*time.Second; i++ {
		e := payout([]string{"alice", "bob", "carol"}[i%3], event.TypePayoutSucceeded)
		h.produce(e)
		ids = append(ids, e.EventID)
		// B gets each event while A is down.
		h.eventually("B receives "+e.EventID, 10*time.Second, func() bool {
			got, _ := b.verifiedIDs(t, bSecret)
			return got[e.EventID] > 0
		})
		time.Sleep(300 * time.Millisecond)
	}
	if h.count(`SELECT count(*) FROM outbound_deliveries WHERE endpoint_id = $1 AND state = 'succeeded'`, aID) != 0 {
		t.Fatal("A had deliveries succeed while it answered 503")
	}
	aUp.Store(true)
	h.eventually("every delivery succeeded", 30*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_deliveries WHERE state <> 'succeeded'`) == 0 &&
			h.count(`SELECT count(*) FROM outbound_deliveries`) == 2*len(ids)
	})

	for name, rc := range map[string]struct {
		r      *receiver
		secret string
	}{"A": {a, aSecret}, "B": {b, bSecret}} {
		got, unverified := rc.r.verifiedIDs(t, rc.secret)
		if unverified != 0 {
			t.Errorf("%s: %d requests the library did not verify", name, unverified)
		}
		if len(got) != len(ids) {
			t.Errorf("%s verified %d distinct events, want %d", name, len(got), len(ids))
		}
		for _, id := range ids {
			if got[id] == 0 {
				t.Errorf("%s never got %s", name, id)
			}
		}
	}
	// A's requests: the failed ones and one success per event, all logged.
	if n, logged := len(a.requests()), h.count(`SELECT count(*) FROM outbound_attempts WHERE endpoint_id = $1`, aID); n != logged {
		t.Errorf("A got %d requests, %d attempts logged", n, logged)
	}
	if h.count(`SELECT count(*) FROM outbound_attempts WHERE endpoint_id = $1 AND outcome = 'retry' AND status_code = 503`, aID) < len(ids) {
		t.Error("A's 503s are not logged as retries")
	}
	if n := h.count(`SELECT count(*) FROM outbound_attempts WHERE outcome = 'delivered'`); n != 2*len(ids) {
		t.Errorf("%d delivered attempts logged, want %d", n, 2*len(ids))
	}
	if h.count(`SELECT count(*) FROM outbound_endpoint_health WHERE failing_since IS NOT NULL`) != 0 {
		t.Error("an endpoint is still failing after its success")
	}
}

// During a rotation's overlap a receiver with only the old secret and one
// with only the new both verify every delivery; once the overlap is over,
// only the new one does. Every request carries Standard Webhooks' headers.
func TestRotationSignsWithBothSecretsUntilThePreviousExpires(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) })
	oldSecret, err := outbound.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	id, newSecret := h.addEndpoint(rc.srv.URL, endpointOpts{previousSecret: oldSecret, previousUntil: time.Now().Add(time.Hour)})
	h.start(h.config(nil), nil, "intake", "dispatch")

	overlap := []any{payout("dora", event.TypePayoutSucceeded), payout("dora", event.TypePayoutFailed)}
	h.produce(overlap...)
	h.eventually("both delivered", 20*time.Second, func() bool { return len(rc.requests()) == 2 })
	for _, s := range []string{oldSecret, newSecret} {
		if ids, unverified := rc.verifiedIDs(t, s); len(ids) != 2 || unverified != 0 {
			t.Fatalf("during the overlap a receiver verified %d, refused %d", len(ids), unverified)
		}
	}
	for _, r := range rc.requests() {
		if r.header.Get("User-Agent") != "Aegis-Webhooks/1" || r.header.Get("Content-Type") != "application/json" ||
			r.header.Get("webhook-timestamp") == "" || r.header.Get("Aegis-Signature") != "" {
			t.Errorf("headers %v", r.header)
		}
	}

	if _, err := h.db.Pool.Exec(t.Context(), `UPDATE outbound_endpoints SET previous_secret_expires_at = now() - interval '1 second' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	h.produce(payout("dora", event.TypePayoutReversed))
	h.eventually("the third delivered", 20*time.Second, func() bool { return len(rc.requests()) == 3 })
	third := rc.requests()[2]
	rc.mu.Lock()
	rc.got = rc.got[2:]
	rc.mu.Unlock()
	if ids, _ := rc.verifiedIDs(t, newSecret); len(ids) != 1 {
		t.Error("after the overlap the new secret does not verify")
	}
	if ids, _ := rc.verifiedIDs(t, oldSecret); len(ids) != 0 {
		t.Errorf("after the overlap the old secret still verifies: %q", third.header.Get("webhook-signature"))
	}
}
