package deliver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/hmacsig"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/deliver"
)

// message inserts a message created age ago with one delivery to endpoint
// in state, and returns the message's and the delivery's ids.
func (h *harness) message(endpoint uuid.UUID, age time.Duration, state string) (int64, int64) {
	h.t.Helper()
	ctx := context.Background()
	var msg, del int64
	id := uuid.NewString()
	if err := h.db.Pool.QueryRow(ctx, `
		INSERT INTO outbound_messages (event_id, event_type, user_id, sequence, occurred_at, body, created_at)
		VALUES ($1, 'payout.succeeded', $1, 1, now() - $2::interval, '{}', now() - $2::interval) RETURNING id`,
		id, age.String()).Scan(&msg); err != nil {
		h.t.Fatal(err)
	}
	finished := "now()"
	if state == "pending" {
		finished = "NULL"
	}
	if err := h.db.Pool.QueryRow(ctx, `
		INSERT INTO outbound_deliveries (message_id, endpoint_id, state, created_at, finished_at)
		VALUES ($1, $2, $3, now() - $4::interval, `+finished+`) RETURNING id`, msg, endpoint, state, age.String()).Scan(&del); err != nil {
		h.t.Fatal(err)
	}
	return msg, del
}

// Retention: attempts older than OUTBOUND_LOG_RETENTION go; messages older
// than OUTBOUND_MESSAGE_RETENTION go with their deliveries unless one is
// still pending.
func TestRetentionDeletesOldAttemptsAndFinishedMessages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ep, _ := h.addEndpoint("http://127.0.0.1:1/none", endpointOpts{})
	// Disabled: the pending one must not be attempted meanwhile.
	if _, err := h.db.Pool.Exec(t.Context(), `UPDATE outbound_endpoints SET enabled = false, disabled_at = now() WHERE id = $1`, ep); err != nil {
		t.Fatal(err)
	}
	oldDone, oldDoneDelivery := h.message(ep, 800*time.Hour, "succeeded")
	oldPending, _ := h.message(ep, 800*time.Hour, "pending")
	recent, recentDelivery := h.message(ep, time.Hour, "failed")
	gone, _ := h.addEndpoint("http://127.0.0.1:1/gone", endpointOpts{})
	if _, err := h.db.Pool.Exec(t.Context(), `UPDATE outbound_endpoints SET enabled = false, disabled_at = now(), deleted_at = now() WHERE id = $1`, gone); err != nil {
		t.Fatal(err)
	}
	oldPendingForDeleted, _ := h.message(gone, 800*time.Hour, "pending")
	for _, a := range []struct {
		delivery, message int64
		age               string
	}{{oldDoneDelivery, oldDone, "800h"}, {recentDelivery, recent, "800h"}, {recentDelivery, recent, "1h"}} {
		if _, err := h.db.Pool.Exec(t.Context(), `
			INSERT INTO outbound_attempts (delivery_id, message_id, endpoint_id, attempt, attempted_at, outcome, latency_ms)
			VALUES ($1, $2, $3, 1, now() - $4::interval, 'failed', 5)`, a.delivery, a.message, ep, a.age); err != nil {
			t.Fatal(err)
		}
	}
	h.start(h.config(nil), nil, "retention")
	h.eventually("the old finished message deleted", 10*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_messages WHERE id = $1`, oldDone) == 0
	})
	h.eventually("the old message pending only for a deleted endpoint deleted", 10*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_messages WHERE id = $1`, oldPendingForDeleted) == 0
	})
	h.eventually("the old attempt deleted", 10*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_attempts WHERE attempted_at < now() - interval '720 hours'`) == 0
	})
	if h.count(`SELECT count(*) FROM outbound_deliveries WHERE id = $1`, oldDoneDelivery) != 0 {
		t.Error("the old message's delivery stayed")
	}
	if h.count(`SELECT count(*) FROM outbound_messages WHERE id IN ($1, $2)`, oldPending, recent) != 2 {
		t.Error("a message with a pending delivery, or a recent one, was deleted")
	}
	if h.count(`SELECT count(*) FROM outbound_attempts WHERE delivery_id = $1`, recentDelivery) != 1 {
		t.Error("the recent attempt was deleted")
	}
}

// The stats loop exports each undeleted endpoint's pending deliveries and
// the age of its oldest.
func TestStatsExportPendingPerEndpoint(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	busy, _ := h.addEndpoint("http://127.0.0.1:1/busy", endpointOpts{})
	idle, _ := h.addEndpoint("http://127.0.0.1:1/idle", endpointOpts{})
	for _, age := range []time.Duration{100 * time.Second, time.Second, time.Second} {
		h.message(busy, age, "pending")
	}
	h.message(idle, time.Hour, "succeeded")
	r := h.start(h.config(nil), nil, "stats")
	h.eventually("the gauges set", 10*time.Second, func() bool {
		return gaugeValue(t, r, deliver.MetricPending, busy.String()) == 3
	})
	if got := gaugeValue(t, r, deliver.MetricOldest, busy.String()); got < 100 || got > 3600 {
		t.Errorf("oldest pending %vs, want about 100", got)
	}
	if gaugeValue(t, r, deliver.MetricPending, idle.String()) != 0 || gaugeValue(t, r, deliver.MetricOldest, idle.String()) != 0 {
		t.Error("an endpoint with nothing pending should export 0")
	}
}

// An endpoint's rate limit holds across two relays: a token bucket of
// rate_limit tokens refilled at rate_limit per second, so no five of its
// requests arrive within 1.5 s at 2 per second (unlimited, all ten would
// arrive at once).
func TestRateLimitHoldsAcrossRelays(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) })
	two := 2
	id, _ := h.addEndpoint(rc.srv.URL, endpointOpts{rateLimit: &two})
	h.start(h.config(nil), nil, "intake", "dispatch")
	h.start(h.config(nil), nil, "intake", "dispatch")
	var events []any
	for range 10 {
		events = append(events, payout("uma", event.TypePayoutSucceeded))
	}
	h.produce(events...)
	h.eventually("all delivered", 30*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_deliveries WHERE endpoint_id = $1 AND state = 'succeeded'`, id) == 10
	})
	reqs := rc.requests()
	if len(reqs) != 10 {
		t.Fatalf("%d requests, want 10", len(reqs))
	}
	// Within any window of T seconds at most 2 + 2T: five need 1.5 s (less
	// a margin for the way from the claim to the receiver).
	for i := 0; i+4 < len(reqs); i++ {
		if gap := reqs[i+4].at.Sub(reqs[i].at); gap < 1200*time.Millisecond {
			t.Errorf("requests %d to %d arrived within %s", i+1, i+5, gap)
		}
	}
}

// An endpoint with a legacy secret also carries Aegis-Signature (the old
// scheme, t=…,v1=<hex>) and Aegis-Event-Id.
func TestALegacySecretAddsTheOldSignature(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) })
	const legacy = "the-old-settlement-secret"
	_, secret := h.addEndpoint(rc.srv.URL, endpointOpts{legacySecret: legacy})
	h.start(h.config(nil), nil, "intake", "dispatch")
	e := payout("vic", event.TypePayoutSucceeded)
	h.produce(e)
	h.eventually("delivered", 20*time.Second, func() bool { return len(rc.requests()) == 1 })
	r := rc.requests()[0]
	if err := hmacsig.VerifyTimestamped([]byte(legacy), r.header.Get(deliver.HeaderLegacySignature), r.body, 5*time.Minute, time.Now()); err != nil {
		t.Errorf("Aegis-Signature: %v", err)
	}
	if r.header.Get(deliver.HeaderLegacyEventID) != e.EventID {
		t.Errorf("Aegis-Event-Id %q, want %q", r.header.Get(deliver.HeaderLegacyEventID), e.EventID)
	}
	if ids, _ := rc.verifiedIDs(t, secret); ids[e.EventID] != 1 {
		t.Error("the Standard Webhooks signature is missing beside the legacy one")
	}
}
