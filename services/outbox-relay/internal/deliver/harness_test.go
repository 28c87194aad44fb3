package deliver_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/outbound"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/deliver"
)

// fastSchedule is the default schedule scaled 1/3600 (an hour is a second).
const fastSchedule = "1ms,83ms,500ms,2s,5s,10s,10s"

type harness struct {
	t       *testing.T
	db      *pgtest.DB
	pool    *pgxpool.Pool // the relay's role
	cluster *kfake.Cluster
	kafka   *kgo.Client
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	db := pgtest.New(t)
	cluster := kafkatest.NewCluster(t)
	return &harness{t: t, db: db, pool: db.As(t, "aegis_outbox_relay"), cluster: cluster,
		kafka: kafkatest.NewClient(t, cluster, kgo.DefaultProduceTopic(kafkax.TopicSettlements))}
}

// config is a test's settings: a fast poll, the fast schedule, development
// URL policy (httptest receivers are http on loopback).
func (h *harness) config(mod func(*deliver.Config)) deliver.Config {
	sched, err := deliver.ParseSchedule(fastSchedule)
	if err != nil {
		h.t.Fatal(err)
	}
	c := deliver.Config{
		Group: "outbound-test", Brokers: h.cluster.ListenAddrs(),
		Membership:   kafkax.Membership{SessionTimeout: 6 * time.Second},
		PollInterval: 20 * time.Millisecond, Timeout: 5 * time.Second, Schedule: sched,
		HealthInterval: 50 * time.Millisecond, MaxPollRecords: 100,
		Policy: outbound.Policy{AllowHTTP: true, AllowPrivate: true},
	}
	if mod != nil {
		mod(&c)
	}
	return c
}

// relay is one relay process's outbound delivery.
type relay struct {
	d      *deliver.Deliverer
	reg    *prometheus.Registry
	cancel context.CancelFunc
}

// start runs d's loops (intake, dispatch, health, stats) until the test ends
// or stop. alerts (optional) records its ALERT log lines.
func (h *harness) start(cfg deliver.Config, alerts *alertSink, loops ...string) *relay {
	h.t.Helper()
	return h.startTraced(cfg, alerts, nil, loops...)
}

// startTraced is start with the attempts' spans made by tp.
func (h *harness) startTraced(cfg deliver.Config, sink *alertSink, tp trace.TracerProvider, loops ...string) *relay {
	h.t.Helper()
	reg := prometheus.NewRegistry()
	deps := lifecycle.Deps{Registerer: reg, Logger: slog.New(slog.NewTextHandler(h.t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))}
	alertDeps := deps
	if sink != nil {
		alertDeps.Logger = slog.New(slog.NewJSONHandler(sink, nil))
	}
	alerts, err := alert.New(alert.Config{Source: "outbox-relay"}, alertDeps)
	if err != nil {
		h.t.Fatal(err)
	}
	d, err := deliver.New(cfg, deliver.Deps{Deps: deps, Pool: h.pool, Alerts: alerts, Tracing: tp})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, l := range loops {
		switch l {
		case "intake":
			wg.Go(func() { _ = d.RunIntake(ctx) })
		case "dispatch":
			wg.Go(func() { _ = d.RunDispatch(ctx) })
		case "health":
			wg.Go(func() { d.RunHealth(ctx) })
		case "stats":
			wg.Go(func() { d.RunStats(ctx, 50*time.Millisecond) })
		case "retention":
			wg.Go(func() { d.RunRetention(ctx, 50*time.Millisecond) })
		default:
			h.t.Fatalf("no loop %q", l)
		}
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			d.Close()
		})
	}
	h.t.Cleanup(stop)
	return &relay{d: d, reg: reg, cancel: func() { stop() }}
}

// endpointOpts are an endpoint's columns besides its URL.
type endpointOpts struct {
	types          []string
	rateLimit      *int
	previousSecret string
	previousUntil  time.Time
	legacySecret   string
}

// addEndpoint registers url (as dlq-admin would) and returns its id and secret.
func (h *harness) addEndpoint(url string, o endpointOpts) (uuid.UUID, string) {
	h.t.Helper()
	secret, err := outbound.NewSecret()
	if err != nil {
		h.t.Fatal(err)
	}
	if o.types == nil {
		o.types = []string{}
	}
	var prev, legacy *string
	var until *time.Time
	if o.previousSecret != "" {
		prev, until = &o.previousSecret, &o.previousUntil
	}
	if o.legacySecret != "" {
		legacy = &o.legacySecret
	}
	var id uuid.UUID
	err = h.db.Pool.QueryRow(context.Background(), `
		INSERT INTO outbound_endpoints (url, event_types, rate_limit, secret, previous_secret, previous_secret_expires_at,
		                                legacy_secret, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'test') RETURNING id`,
		url, o.types, o.rateLimit, secret, prev, until, legacy).Scan(&id)
	if err != nil {
		h.t.Fatal(err)
	}
	return id, secret
}

// payout is a valid payout.* event of user.
func payout(user string, typ event.Type) event.PayoutOutcome {
	status := map[event.Type]string{event.TypePayoutSucceeded: "SUCCEEDED", event.TypePayoutNeedsReview: "NEEDS_REVIEW",
		event.TypePayoutPartiallyReversed: "SUCCEEDED"}[typ]
	if status == "" {
		status = "FINALIZED"
	}
	return event.NewPayoutOutcome(typ, uuid.NewString(), status, user, 1250, "usd", "stripe", time.Now())
}

// posting is a valid refund.* or dispute.* event of user.
func posting(user string, typ event.Type) event.ReturnPosted {
	return event.ReturnPosted{
		Settlement: event.Settlement{SchemaVersion: event.SettlementSchemaVersion, EventID: "ret:" + uuid.NewString(), Type: typ,
			OccurredAt: time.Now().UTC(), UserID: user, Amount: 300, Currency: "usd", Provider: "stripe"},
		ObjectID: "re_" + uuid.NewString()[:8], PaymentReference: "pi_" + uuid.NewString()[:8],
	}
}

// produce publishes events to aegis.settlements keyed by their user, in order.
func (h *harness) produce(events ...any) {
	h.t.Helper()
	for _, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			h.t.Fatal(err)
		}
		var head struct {
			UserID string `json:"user_id"`
		}
		_ = json.Unmarshal(b, &head)
		h.produceRaw(head.UserID, b)
	}
}

func (h *harness) produceRaw(key string, value []byte) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.kafka.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: value}).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// count is a single-number query on the owner's pool.
func (h *harness) count(sql string, args ...any) int {
	h.t.Helper()
	var n int
	if err := h.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		h.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// eventually polls cond until it holds or the deadline (generous: not a
// performance assertion) passes.
func (h *harness) eventually(what string, within time.Duration, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// request is one request a receiver got.
type request struct {
	header http.Header
	body   []byte
	at     time.Time
}

// receiver is an endpoint's server: it records every request and answers
// with respond.
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []request
}

func newReceiver(t *testing.T, respond func(w http.ResponseWriter, r *http.Request, n int)) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, request{header: r.Header.Clone(), body: body, at: time.Now()})
		n := len(rc.got)
		rc.mu.Unlock()
		respond(w, r, n)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.got...)
}

// verifiedIDs is the set of webhook-ids of the requests the secret
// verifies (the Standard Webhooks library); unverified counts the rest.
func (rc *receiver) verifiedIDs(t *testing.T, secret string) (ids map[string]int, unverified int) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	ids = map[string]int{}
	for _, r := range rc.requests() {
		if err := wh.Verify(r.body, r.header); err != nil {
			unverified++
			continue
		}
		ids[r.header.Get("webhook-id")]++
	}
	return ids, unverified
}

// alertSink records the keys of the alerter's structured ALERT log lines
// (the alerter's only output: what pages is AegisOutboundEndpointDisabled
// on aegis_outbound_endpoints_disabled).
type alertSink struct {
	mu   sync.Mutex
	keys []string
}

func newAlertSink(*testing.T) *alertSink { return &alertSink{} }

// Write takes one JSON log line (slog's handler writes a line a call).
func (s *alertSink) Write(p []byte) (int, error) {
	var line struct {
		Msg string `json:"msg"`
		Key string `json:"alert_key"`
	}
	if err := json.Unmarshal(p, &line); err == nil && strings.HasPrefix(line.Msg, "ALERT: ") {
		s.mu.Lock()
		s.keys = append(s.keys, line.Key)
		s.mu.Unlock()
	}
	return len(p), nil
}

// withKey counts the alerts whose key is key.
func (s *alertSink) withKey(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range s.keys {
		if k == key {
			n++
		}
	}
	return n
}

// gaugeValue is the value of r's gauge name for endpoint (-1 when it has
// none).
func gaugeValue(t *testing.T, r *relay, name, endpoint string) float64 {
	return labelledGauge(t, r, name, "endpoint", endpoint)
}

// reasonGauge is the value of r's gauge name with label reason (-1 when
// it has none).
func reasonGauge(t *testing.T, r *relay, name, reason string) float64 {
	return labelledGauge(t, r, name, "reason", reason)
}

// labelledGauge is the value of r's gauge name whose label has value
// (-1 when it has none).
func labelledGauge(t *testing.T, r *relay, name, label, value string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// counterValue is the value of r's counter name with the label value
// label (0 when it has none).
func counterValue(t *testing.T, r *relay, name, label string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
