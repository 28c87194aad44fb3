package deliver_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/deliver"
)

// An endpoint failing every attempt for OUTBOUND_DISABLE_AFTER is disabled
// by exactly one of two relays, with one alert; its deliveries wait. Then
// recover_outbound_endpoint and enabling it (dlq-admin's operator actions)
// send it everything: what waited and what came while it was disabled.
func TestAFailingEndpointIsDisabledOnceThenRecoverSendsWhatItMissed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	sink := newAlertSink(t)
	var up atomic.Bool
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		if up.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	})
	id, secret := h.addEndpoint(rc.srv.URL, endpointOpts{})
	cfg := h.config(func(c *deliver.Config) { c.DisableAfter = 2 * time.Second })
	r1 := h.start(cfg, sink, "intake", "dispatch", "health", "stats")
	r2 := h.start(cfg, sink, "intake", "dispatch", "health", "stats")
	start := time.Now().Add(-time.Minute)
	b1, b2 := payout("rae", event.TypePayoutSucceeded), payout("rae", event.TypePayoutFailed)
	h.produce(b1, b2)

	h.eventually("the endpoint disabled", 20*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND NOT enabled AND disabled_reason LIKE 'failed every attempt%'`, id) == 1
	})
	key := alert.OutboundEndpointDisabledKey(id.String())
	h.eventually("its alert", 10*time.Second, func() bool { return sink.withKey(key) > 0 })
	time.Sleep(500 * time.Millisecond) // both health loops ran again meanwhile
	if n := sink.withKey(key); n != 1 {
		t.Errorf("%d alerts from two relays, want 1", n)
	}
	if n := counterValue(t, r1, deliver.MetricDisabled, "failing") + counterValue(t, r2, deliver.MetricDisabled, "failing"); n != 1 {
		t.Errorf("disabled counted %v times, want 1", n)
	}
	// The condition AegisOutboundEndpointDisabled pages on: both replicas
	// export the same figure from the database (the rule takes max).
	h.eventually("both replicas export the disabled endpoint", 10*time.Second, func() bool {
		return reasonGauge(t, r1, deliver.MetricDisabledNow, "failing") == 1 && reasonGauge(t, r2, deliver.MetricDisabledNow, "failing") == 1
	})
	// Disabled: its pending deliveries wait, new events make none.
	sent := len(rc.requests())
	during := payout("rae", event.TypePayoutReversed)
	h.produce(during)
	h.eventually("the event during the outage stored", 20*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_messages WHERE event_id = $1`, during.EventID) == 1
	})
	time.Sleep(300 * time.Millisecond)
	if len(rc.requests()) != sent {
		t.Error("a disabled endpoint got a request")
	}

	up.Store(true)
	if _, err := h.db.Pool.Exec(t.Context(), `SELECT recover_outbound_endpoint($1, $2, 100)`, id, start); err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.Pool.Exec(t.Context(), `UPDATE outbound_endpoints SET enabled = true, enabled_at = now(), disabled_at = NULL,
	                                              disabled_by = NULL, disabled_reason = NULL WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	h.eventually("everything it missed delivered", 30*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_deliveries WHERE endpoint_id = $1 AND state = 'succeeded'`, id) == 3
	})
	h.eventually("enabled: the condition resolves on both replicas", 10*time.Second, func() bool {
		return reasonGauge(t, r1, deliver.MetricDisabledNow, "failing") == 0 && reasonGauge(t, r2, deliver.MetricDisabledNow, "failing") == 0
	})
	got, _ := rc.verifiedIDs(t, secret)
	for _, id := range []string{b1.EventID, b2.EventID, during.EventID} {
		if got[id] == 0 {
			t.Errorf("%s never verified", id)
		}
	}
}

// A slow endpoint (answers after 2s) does not hold back a fast one: the
// fast one has every delivery while the slow one still has pending ones.
func TestASlowEndpointDoesNotHoldBackAFastOne(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	slow := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		time.Sleep(2 * time.Second)
		w.WriteHeader(http.StatusOK)
	})
	fast := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) })
	slowID, _ := h.addEndpoint(slow.srv.URL, endpointOpts{})
	fastID, _ := h.addEndpoint(fast.srv.URL, endpointOpts{})
	h.start(h.config(func(c *deliver.Config) { c.Senders = 8 }), nil, "intake", "dispatch")
	var events []any
	for range 20 {
		events = append(events, payout("sam", event.TypePayoutSucceeded))
	}
	h.produce(events...)
	h.eventually("the fast endpoint has every delivery", 30*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_deliveries WHERE endpoint_id = $1 AND state = 'succeeded'`, fastID) == 20
	})
	if h.count(`SELECT count(*) FROM outbound_deliveries WHERE endpoint_id = $1 AND state = 'pending'`, slowID) == 0 {
		t.Error("the slow endpoint was served first")
	}
}

// A delivery claimed by a relay that dies mid-request (its context ends)
// is attempted again by another after its lease; the abandoned attempt is
// not logged, the one that answered is.
func TestADeliveryOfADeadRelayIsAttemptedAgainAfterItsLease(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			select { // hang until the relay goes away
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	h.addEndpoint(rc.srv.URL, endpointOpts{})
	cfg := h.config(func(c *deliver.Config) { c.Timeout, c.Lease = 5*time.Second, 6*time.Second })
	dying := h.start(cfg, nil, "intake", "dispatch")
	e := payout("tess", event.TypePayoutSucceeded)
	h.produce(e)
	h.eventually("the first request arrives", 20*time.Second, func() bool { return len(rc.requests()) == 1 })
	dying.cancel()
	h.start(cfg, nil, "dispatch")
	h.eventually("delivered by the other relay", 30*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_deliveries WHERE state = 'succeeded' AND attempts = 2`) == 1
	})
	reqs := rc.requests()
	if len(reqs) != 2 || reqs[0].header.Get("webhook-id") != e.EventID || reqs[1].header.Get("webhook-id") != e.EventID {
		t.Fatalf("%d requests, want the same event twice", len(reqs))
	}
	if h.count(`SELECT count(*) FROM outbound_attempts`) != 1 ||
		h.count(`SELECT count(*) FROM outbound_attempts WHERE attempt = 2 AND outcome = 'delivered'`) != 1 {
		t.Error("want exactly the answered attempt logged")
	}
}
