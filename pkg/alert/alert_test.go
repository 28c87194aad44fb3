package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/lifecycle"
)

type receiver struct {
	mu     sync.Mutex
	bodies []map[string]any
	srv    *httptest.Server
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(req.Body).Decode(&m)
		r.mu.Lock()
		r.bodies = append(r.bodies, m)
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) got() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.bodies...)
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func start(t *testing.T, cfg Config, c *clock) (*Alerter, *bytes.Buffer, *prometheus.Registry) {
	t.Helper()
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	a, err := New(cfg, lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Registerer: reg, Clock: c.now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return a, &logs, reg
}

func TestBurstPagesOnceAndCountsTheRest(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	c := &clock{t: time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC)}
	a, logs, _ := start(t, Config{Source: "payout-worker", WebhookURL: r.srv.URL, DedupeWindow: 5 * time.Minute}, c)

	for range 1000 {
		a.Raise(context.Background(), Alert{Key: "dead_letter:aegis.transactions", Severity: Error, Summary: "dead letter"})
	}
	require.Eventually(t, func() bool { return len(r.got()) == 1 }, 5*time.Second, 5*time.Millisecond)
	// Raise decides at once: 999 folded and one queued, which is now
	// delivered with nothing else queued behind it.
	if got := testutil.ToFloat64(a.sent.WithLabelValues("suppressed")); got != 999 {
		t.Fatalf("999 of the burst must be folded, got %v", got)
	}
	require.Eventually(t, func() bool { return testutil.ToFloat64(a.sent.WithLabelValues("sent")) == 1 }, 5*time.Second, 5*time.Millisecond)
	if len(a.queue) != 0 {
		t.Fatalf("%d more pages are queued", len(a.queue))
	}
	if n := len(r.got()); n != 1 {
		t.Fatalf("a burst of 1000 must page once, paged %d times", n)
	}
	if n := strings.Count(logs.String(), "ALERT: dead letter"); n != 1000 {
		t.Fatalf("every alert is logged, got %d lines", n)
	}
	if got := testutil.ToFloat64(a.count.WithLabelValues("dead_letter:aegis.transactions", "error")); got != 1000 {
		t.Fatalf("every alert is counted, got %v", got)
	}

	// After the window the next one pages again and says what it folded.
	c.t = c.t.Add(6 * time.Minute)
	a.Raise(context.Background(), Alert{Key: "dead_letter:aegis.transactions", Severity: Error, Summary: "dead letter"})
	require.Eventually(t, func() bool { return len(r.got()) == 2 }, 5*time.Second, 5*time.Millisecond)
	if got := r.got()[1]["suppressed"]; got != float64(999) {
		t.Fatalf("second notice must report 999 folded alerts, got %v", got)
	}
	// Another key is its own page.
	a.Raise(context.Background(), Alert{Key: "reconciliation", Severity: Critical, Summary: "ledger discrepancy"})
	require.Eventually(t, func() bool { return len(r.got()) == 3 }, 5*time.Second, 5*time.Millisecond)
}

func TestFormats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg   Config
		check func(m map[string]any) bool
	}{
		{Config{Format: FormatSlack}, func(m map[string]any) bool {
			s, _ := m["text"].(string)
			return strings.Contains(s, "ledger discrepancy") && strings.Contains(s, "wallets")
		}},
		{Config{Format: FormatPagerDuty, RoutingKey: "rk"}, func(m map[string]any) bool {
			p, _ := m["payload"].(map[string]any)
			return m["routing_key"] == "rk" && m["event_action"] == "trigger" && p["severity"] == "critical" &&
				p["summary"] == "ledger discrepancy" && m["dedup_key"] == "reconciliation"
		}},
		{Config{}, func(m map[string]any) bool { return m["key"] == "reconciliation" && m["severity"] == "critical" }},
	} {
		r := newReceiver(t)
		cfg := tc.cfg
		cfg.Source, cfg.WebhookURL = "dlq-admin", r.srv.URL
		a, _, _ := start(t, cfg, &clock{t: time.Now()})
		a.Raise(context.Background(), Alert{Key: "reconciliation", Severity: Critical, Summary: "ledger discrepancy",
			Details: map[string]any{"wallets": "u1,u2"}})
		require.Eventually(t, func() bool { return len(r.got()) == 1 }, 5*time.Second, 5*time.Millisecond)
		if !tc.check(r.got()[0]) {
			t.Errorf("%s body: %v", cfg.Format, r.got()[0])
		}
	}
	if err := (Config{Format: "email"}).Validate(); err == nil {
		t.Error("unknown format must be refused")
	}
	if err := (Config{Format: FormatPagerDuty, WebhookURL: "http://x"}).Validate(); err == nil {
		t.Error("pagerduty without routing key must be refused")
	}
}

func TestWithoutWebhookOnlyLogsAndCounts(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	a, err := New(Config{Source: "x"}, lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Registerer: prometheus.NewRegistry(), Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	a.Run(context.Background()) // returns at once
	a.Raise(context.Background(), Alert{Key: "k", Summary: "s"})
	if !strings.Contains(logs.String(), `"alert_key":"k"`) {
		t.Fatalf("log line missing: %s", logs.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The webhook URL is a credential (Slack's path is the secret): a failed
// delivery is logged without it, and a bad URL is refused without quoting it.
func TestWebhookURLNeverReachesTheLog(t *testing.T) {
	t.Parallel()
	const secret = "T0000/B0000/s3cr3t-path-XXXXXXXX"
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // nothing listens there now: every delivery fails to connect
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	a, err := New(Config{Source: "test", WebhookURL: deadURL + "/services/" + secret}, lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Registerer: reg, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	a.Raise(ctx, Alert{Key: "k", Summary: "s"})
	require.Eventually(t, func() bool { return testutil.ToFloat64(a.sent.WithLabelValues("failed")) >= 1 }, 30*time.Second,
		20*time.Millisecond, "delivery never failed")
	out := logs.String()
	if !strings.Contains(out, "alert webhook delivery failed") || !strings.Contains(out, "connection refused") {
		t.Fatalf("the failure is logged with its cause: %s", out)
	}
	if strings.Contains(out, secret) || strings.Contains(out, "s3cr3t") {
		t.Fatalf("the webhook URL leaked into the log: %s", out)
	}

	for _, bad := range []string{"ftp://hooks.example/" + secret, "hooks.example/" + secret, "http://[::1/" + secret} {
		err := Config{WebhookURL: bad}.Validate()
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("ALERT_WEBHOOK_URL %q: %v", bad, err)
		}
	}
}
