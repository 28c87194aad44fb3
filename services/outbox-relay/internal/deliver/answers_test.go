package deliver_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/outbound"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/deliver"
)

// 410 Gone: the delivery fails and the endpoint is disabled at once, with
// one alert, however many deliveries got the 410; it gets nothing more.
func TestGoneDisablesTheEndpointWithOneAlert(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	sink := newAlertSink(t)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusGone) })
	id, _ := h.addEndpoint(rc.srv.URL, endpointOpts{})
	r := h.start(h.config(nil), sink, "intake", "dispatch", "stats")
	h.produce(payout("gus", event.TypePayoutSucceeded), payout("gus", event.TypePayoutFailed), payout("gus", event.TypePayoutReversed))

	h.eventually("the endpoint disabled", 20*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND NOT enabled AND disabled_by = 'outbox-relay'
		                AND disabled_reason LIKE '%410%'`, id) == 1
	})
	h.eventually("its alert", 10*time.Second, func() bool { return sink.withKey(alert.OutboundEndpointDisabledKey(id.String())) > 0 })
	time.Sleep(500 * time.Millisecond) // room for a second alert that must not come
	if n := sink.withKey("outbound-endpoint-disabled:" + id.String()); n != 1 {
		t.Errorf("%d alerts, want 1", n)
	}
	if got := counterValue(t, r, deliver.MetricDisabled, "gone"); got != 1 {
		t.Errorf("disabled counter %v, want 1", got)
	}
	// What pages is the condition, from the database: one endpoint the
	// relay disabled for 410 is still disabled.
	h.eventually("the disabled gauge", 10*time.Second, func() bool {
		return reasonGauge(t, r, deliver.MetricDisabledNow, "gone") == 1 && reasonGauge(t, r, deliver.MetricDisabledNow, "failing") == 0
	})
	sent := len(rc.requests())
	if h.count(`SELECT count(*) FROM outbound_deliveries WHERE state = 'failed' AND last_status = 410`) != sent {
		t.Errorf("not every delivery that got 410 failed")
	}
	if h.count(`SELECT count(*) FROM outbound_attempts WHERE outcome = 'failed' AND status_code = 410`) != sent {
		t.Errorf("not every 410 logged as failed")
	}
	h.produce(payout("gus", event.TypePayoutNeedsReview))
	time.Sleep(500 * time.Millisecond)
	if len(rc.requests()) != sent {
		t.Error("a disabled endpoint got another request")
	}
}

// Another 4xx (not 408, 409, 429) is final: failed after one attempt, no
// more requests, the endpoint failing but enabled.
func TestA400IsFinal(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("bad payload"))
	})
	id, _ := h.addEndpoint(rc.srv.URL, endpointOpts{})
	h.start(h.config(nil), nil, "intake", "dispatch")
	h.produce(payout("hal", event.TypePayoutSucceeded))
	h.eventually("failed", 20*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_deliveries WHERE state = 'failed' AND attempts = 1 AND last_status = 400
		                AND finished_at IS NOT NULL`) == 1
	})
	time.Sleep(time.Second) // the schedule's first delays are 1ms and 83ms
	if n := len(rc.requests()); n != 1 {
		t.Errorf("%d requests after a 400, want 1", n)
	}
	if h.count(`SELECT count(*) FROM outbound_attempts WHERE outcome = 'failed' AND status_code = 400 AND response_body = 'bad payload'`) != 1 {
		t.Error("the 400 is not logged with its answer")
	}
	if h.count(`SELECT count(*) FROM outbound_endpoint_health WHERE endpoint_id = $1 AND failing_since IS NOT NULL`, id) != 1 ||
		h.count(`SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND enabled`, id) != 1 {
		t.Error("a 400 should leave the endpoint failing and enabled")
	}
}

// 429 with Retry-After (seconds, or an HTTP date) postpones the next
// attempt past the schedule's delay (1ms here).
func TestRetryAfterPostponesTheNextAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for name, value := range map[string]func() string{
		"seconds":   func() string { return "2" },
		"http-date": func() string { return time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat) },
	} {
		rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, n int) {
			if n == 1 {
				w.Header().Set("Retry-After", value())
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		id, _ := h.addEndpoint(rc.srv.URL+"/"+name, endpointOpts{types: []string{"payout.*"}})
		t.Cleanup(func() {
			reqs := rc.requests()
			if len(reqs) != 2 {
				t.Errorf("%s: %d requests, want 2", name, len(reqs))
				return
			}
			if gap := reqs[1].at.Sub(reqs[0].at); gap < 1900*time.Millisecond {
				t.Errorf("%s: retried after %s despite Retry-After", name, gap)
			}
			if h.count(`SELECT count(*) FROM outbound_attempts WHERE endpoint_id = $1 AND outcome = 'retry' AND status_code = 429`, id) != 1 {
				t.Errorf("%s: the 429 is not logged as a retry", name)
			}
		})
	}
	h.start(h.config(nil), nil, "intake", "dispatch")
	h.produce(payout("ida", event.TypePayoutSucceeded))
	h.eventually("both delivered after their Retry-After", 20*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_deliveries WHERE state = 'succeeded' AND attempts = 2`) == 2
	})
}

// A redirect is answered, not followed (a retry), and at most 1 KiB of an
// answer is read and stored.
func TestRedirectsAreNotFollowedAndAnswersAreCappedAt1KiB(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var followed atomic.Int32
	redirect := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.URL.Path == "/elsewhere" {
			followed.Add(1)
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	big := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		_, _ = w.Write([]byte(strings.Repeat("x", 64<<10)))
	})
	redirectID, _ := h.addEndpoint(redirect.srv.URL+"/hook", endpointOpts{})
	bigID, _ := h.addEndpoint(big.srv.URL, endpointOpts{})
	h.start(h.config(nil), nil, "intake", "dispatch")
	h.produce(payout("jo", event.TypePayoutSucceeded))
	h.eventually("the big answer delivered, the redirect retried", 20*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_deliveries WHERE endpoint_id = $1 AND state = 'succeeded'`, bigID) == 1 &&
			h.count(`SELECT count(*) FROM outbound_attempts WHERE endpoint_id = $1 AND outcome = 'retry' AND status_code = 302`, redirectID) >= 2
	})
	if followed.Load() != 0 {
		t.Error("a redirect was followed")
	}
	if n := h.count(`SELECT octet_length(response_body) FROM outbound_attempts WHERE endpoint_id = $1`, bigID); n != deliver.ResponseLimit {
		t.Errorf("stored %d bytes of the answer, want %d", n, deliver.ResponseLimit)
	}
}

// Under the production policy an endpoint resolving to loopback is refused
// when connecting: the attempt is logged as a retry with an error that
// names no URL, and the receiver never hears of it.
func TestALoopbackEndpointIsRefusedAtConnectTime(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) })
	url := rc.srv.URL + "/private/path?token=sekrit"
	id, _ := h.addEndpoint(url, endpointOpts{})
	h.start(h.config(func(c *deliver.Config) { c.Policy = outbound.Policy{} }), nil, "intake", "dispatch")
	h.produce(payout("kim", event.TypePayoutSucceeded))
	h.eventually("attempts logged", 20*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_attempts WHERE endpoint_id = $1 AND outcome = 'retry'
		                AND status_code IS NULL AND error LIKE '%not a public address%'`, id) >= 2
	})
	if len(rc.requests()) != 0 {
		t.Error("the loopback receiver got a request")
	}
	var errs []string
	rows, err := h.db.Pool.Query(t.Context(), `SELECT error FROM outbound_attempts UNION ALL SELECT last_error FROM outbound_deliveries`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var e string
		if err := rows.Scan(&e); err != nil {
			t.Fatal(err)
		}
		errs = append(errs, e)
	}
	for _, e := range errs {
		if strings.Contains(e, "sekrit") || strings.Contains(e, "/private") || strings.Contains(e, url) {
			t.Errorf("an error names the URL: %q", e)
		}
	}
}
