package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/breaker"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/pkg/paystackapi"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/psptest"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/consume"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/handler"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/psp"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/walletlock"
)

const group = "payout-worker"

// TestMain builds the PSP stand-in once: every world starts one.
func TestMain(m *testing.M) { os.Exit(psptest.Main(m)) }

type world struct {
	alerts      *alertReceiver
	reg         *prometheus.Registry
	proc        *payout.Processor
	newConsumer func() (*consume.Consumer, *kgo.Client)
	t           *testing.T
	db          *pgtest.DB
	kafka       *kfake.Cluster
	producer    *kgo.Client
	psp         *psptest.StandIn
	pspProxy    *pspProxy
	user        string
	// clock is the payout processor's clock; settleWindow its
	// PSP_SETTLE_WINDOW.
	clock        *clock
	settleWindow time.Duration
	// stops stops each consumer startConsumer ran.
	stops []func()
	// locks is the worker's wallet locker (a test holds a wallet with it).
	locks *walletlock.Locker
	// live is the mode of the worker's Stripe key (options.liveKey): the
	// Stripe events the test publishes say it.
	live bool
	// proof is webhook-api's signing key: produce signs money events with
	// it, as webhook-api does; produceUnsigned does not.
	proof *eventproof.Keys
	// breakers are the worker's PSP breakers by provider.
	breakers map[string]*breaker.Breaker[psp.Result]
}

// testEventKey is AEGIS_EVENT_SIGNING_KEY of the tests' webhook-api and worker.
const testEventKey = "test-event-signing-key-0123456789abcdef"

// clock is the time the processor sees: the wall clock, moved forward by
// the test (to pass the settle window without waiting for it).
type clock struct{ ahead atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *clock) advance(d time.Duration) { c.ahead.Add(int64(d)) }

// offset is how far the processor's clock is ahead of the wall clock.
func (c *clock) offset() time.Duration { return time.Duration(c.ahead.Load()) }

// passSettleWindow moves the processor's clock past the settle window, so
// that a lookup that finds nothing proves the PSP has nothing.
func (w *world) passSettleWindow() { w.clock.advance(w.settleWindow + time.Second) }

// pspProxy stands between the worker and the PSP stand-in and can make the
// PSP unable to answer lookups (list payouts/transfers, Paystack verify),
// swallow the answer to a create that the PSP executed, or answer creates
// with another Paystack transfer status.
type pspProxy struct {
	// failLookups makes lookups answer 500, after the first passLookups.
	failLookups atomic.Bool
	passLookups atomic.Int64
	// rewriteLookups, when set, rewrites the body of every lookup answer
	// (a PSP whose record differs from the stand-in's).
	rewriteLookups atomic.Pointer[func([]byte) []byte]
	// swallowCreates is how many creates the PSP executes and whose answer
	// never comes back: the proxy holds the request until the worker gives
	// up on it. swallowed gets one value per create so held.
	swallowCreates atomic.Int64
	swallowed      chan struct{}
	// dropCreates is how many creates never reach the PSP: the proxy holds
	// the request until the worker gives up on it (a worker stopped after
	// its commit, before its call got through). dropped gets the
	// Idempotency-Key of each create so held.
	dropCreates atomic.Int64
	dropped     chan string
	// passCreates is how many creates reach the PSP and answer before
	// dropCreates or swallowCreates take any (a transfer answered, then
	// the connected account's payout lost).
	passCreates atomic.Int64
	// paystackStatus, when set, replaces data.status in Paystack's answers
	// to creates (POST /transfer); paystackLookupStatus in its answers to
	// lookups (GET /transfer/verify/…).
	paystackStatus       atomic.Pointer[string]
	paystackLookupStatus atomic.Pointer[string]
	url                  string
}

// isLookup reports whether r looks a payout up at the PSP.
func isLookup(r *http.Request) bool {
	return r.Method == http.MethodGet && (r.URL.Path == "/v1/payouts" || r.URL.Path == "/v1/transfers" ||
		strings.HasPrefix(r.URL.Path, "/transfer/verify/"))
}

// rewriteLookup applies rewriteLookups to resp when it answers a lookup.
func (p *pspProxy) rewriteLookup(resp *http.Response) error {
	rewrite := p.rewriteLookups.Load()
	if rewrite == nil || !isLookup(resp.Request) {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	body = (*rewrite)(body)
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

func newPSPProxy(t *testing.T, target string) *pspProxy {
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := &pspProxy{swallowed: make(chan struct{}, 16), dropped: make(chan string, 16)}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = p.rewriteLookup
	rewriting := httputil.NewSingleHostReverseProxy(u)
	rewriting.ModifyResponse = func(resp *http.Response) error {
		if err := p.rewriteLookup(resp); err != nil {
			return err
		}
		status := p.paystackStatus.Load()
		if resp.Request.Method == http.MethodGet {
			status = p.paystackLookupStatus.Load()
		}
		if status == nil || resp.StatusCode/100 != 2 {
			return nil
		}
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return err
		}
		_ = resp.Body.Close()
		if data, ok := body["data"].(map[string]any); ok {
			data["status"] = *status
		}
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		create := r.Method == http.MethodPost && (r.URL.Path == "/v1/payouts" || r.URL.Path == "/v1/transfers" ||
			r.URL.Path == "/transfer")
		if create && p.passCreates.Add(-1) >= 0 {
			rp.ServeHTTP(w, r)
			return
		}
		if create && p.dropCreates.Add(-1) >= 0 {
			// The PSP never gets it. The body is read so that the server
			// notices the worker closing the connection.
			_, _ = io.Copy(io.Discard, r.Body)
			p.dropped <- r.Header.Get("Idempotency-Key")
			<-r.Context().Done()
			return
		}
		if create && p.swallowCreates.Add(-1) >= 0 {
			// The PSP executes it; its answer is lost with the worker.
			rp.ServeHTTP(httptest.NewRecorder(), r.Clone(context.WithoutCancel(r.Context())))
			p.swallowed <- struct{}{}
			<-r.Context().Done()
			return
		}
		if isLookup(r) && p.failLookups.Load() && p.passLookups.Add(-1) < 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":{"type":"api_error","message":"lookups are down (test proxy)"}}`))
			return
		}
		if create && r.URL.Path == "/transfer" || r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/transfer/verify/") {
			rewriting.ServeHTTP(w, r)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

type options struct {
	breakerOpenFor  time.Duration
	breakerFailures uint32
	maxAttempts     int
	callTimeout     time.Duration
	// idempotencyWindow defaults to 23h.
	idempotencyWindow time.Duration
	// settleWindow defaults to a minute: tests that need it passed say so
	// (passSettleWindow).
	settleWindow time.Duration
	// settlementDelay is the ledger's CREDIT_SETTLEMENT_DELAY (default 0).
	settlementDelay time.Duration
	// creditWait is MONEY_BACK_CREDIT_WAIT (default 0: at once).
	creditWait time.Duration
	// withoutPSP is a provider the worker has no client for.
	withoutPSP string
	// pspEnv is the PSP stand-in's environment (PSP_IDEMPOTENCY_WINDOW …).
	pspEnv map[string]string
	// grace is the consumer's shutdown grace (default 5s).
	grace time.Duration
	// liveKey: the worker's Stripe key is live (sk_live_); default test.
	liveKey bool
}

// setup starts the worker's consumer over real Postgres, Redis, kfake and the
// PSP stand-in. The test plays the relay: it moves outbox rows to Kafka
// with relay(), ignoring next_retry_at so that backoff never makes it wait.
func setup(t *testing.T, o options) *world {
	t.Helper()
	if o.breakerFailures == 0 {
		o.breakerFailures = 100
	}
	if o.maxAttempts == 0 {
		o.maxAttempts = 5
	}
	if o.breakerOpenFor == 0 {
		o.breakerOpenFor = time.Hour
	}
	if o.idempotencyWindow == 0 {
		o.idempotencyWindow = 23 * time.Hour
	}
	if o.callTimeout == 0 {
		o.callTimeout = 5 * time.Second
	}
	if o.settleWindow == 0 {
		o.settleWindow = time.Minute
	}
	if o.grace == 0 {
		o.grace = 5 * time.Second
	}
	w := &world{t: t, db: pgtest.New(t), kafka: kafkatest.NewCluster(t), psp: psptest.Start(t, o.pspEnv),
		user: "user-" + logging.NewCorrelationID()[:8], clock: &clock{}, settleWindow: o.settleWindow, live: o.liveKey,
		breakers: map[string]*breaker.Breaker[psp.Result]{}}
	proof, err := eventproof.New(testEventKey, "")
	require.NoError(t, err)
	w.proof = proof
	w.producer = kafkatest.NewClient(t, w.kafka)
	w.pspProxy = newPSPProxy(t, w.psp.URL)

	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	if os.Getenv("TEST_WORKER_LOGS") != "" {
		logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	redisURL := os.Getenv("TEST_REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	ro, err := goredis.ParseURL(redisURL)
	require.NoError(t, err)
	rdb := goredis.NewClient(ro)
	t.Cleanup(func() { _ = rdb.Close() })
	locks, err := walletlock.New(walletlock.Config{Expiry: 10 * time.Second, Wait: 5 * time.Second}, logger, rdb)
	require.NoError(t, err)
	w.locks = locks

	reg := prometheus.NewRegistry()
	w.reg = reg
	bm := breaker.NewMetrics(reg)
	calls, err := psp.NewCallMetrics(reg)
	require.NoError(t, err)
	registry := psp.Registry{}
	httpClient := &http.Client{}
	for name, c := range map[string]psp.Client{
		"stripe":   psp.NewStripe(stripeapi.New("sk_test_aegis", w.pspProxy.url, httpClient)),
		"paystack": psp.NewPaystack(paystackapi.New("sk_test_paystack", w.pspProxy.url, httpClient)),
	} {
		if name == o.withoutPSP {
			continue
		}
		br, err := breaker.New[psp.Result](breaker.Config{Name: "psp:" + name, ConsecutiveFailures: o.breakerFailures,
			OpenFor: o.breakerOpenFor, HalfOpenProbes: 1}, logger, bm)
		require.NoError(t, err)
		registry[name] = psp.WithBreaker(psp.Timed(c, calls), br)
		w.breakers[name] = br
	}
	w.alerts = &alertReceiver{}
	alerts, err := alert.New(alert.Config{Source: "payout-worker"}, lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(w.alerts, nil)),
		Registerer: reg, Clock: time.Now})
	require.NoError(t, err)
	w.reg = reg
	letters, err := dlq.NewWriter("payout-worker", lifecycle.Deps{Logger: logger, Registerer: reg})
	require.NoError(t, err)
	l := ledger.New(w.db.Pool).WithSettlementDelay(o.settlementDelay)
	proc, err := payout.New(payout.Config{
		Backoff:      backoff.Policy{Base: 5 * time.Second, Multiplier: 2, Max: 60 * time.Second, MaxAttempts: o.maxAttempts},
		BreakerDefer: 30 * time.Second, CallTimeout: o.callTimeout, IdempotencyWindow: o.idempotencyWindow,
		SettleWindow: o.settleWindow, StripeLivemode: o.liveKey,
	}, payout.Deps{Deps: lifecycle.Deps{Logger: logger, Registerer: reg, Clock: w.clock.now},
		Pool: w.db.Pool, Ledger: l, PSPs: registry, Locks: locks, Letters: letters})
	require.NoError(t, err)
	require.NoError(t, payout.RegisterAgeGauges(w.db.Pool, sweepCfg.Deadlines,
		lifecycle.Deps{Logger: logger, Registerer: reg, Clock: w.clock.now}))
	require.NoError(t, payout.RegisterReceivableGauge(w.db.Pool, lifecycle.Deps{Logger: logger, Registerer: reg}))
	w.proc = proc
	// Two committers: groups commit concurrently, as they may in production.
	credits, err := ledger.NewCreditCommitter(l, w.db.Pool, ledger.CreditCommitterConfig{Workers: 2},
		lifecycle.Deps{Logger: logger, Registerer: reg})
	require.NoError(t, err)
	require.NoError(t, credits.Start(context.Background()))
	h := handler.New(handler.Deps{Deps: lifecycle.Deps{Logger: logger, Registerer: reg, Clock: w.clock.now},
		Pool: w.db.Pool, Ledger: l, Credits: credits, Payouts: proc, Alerts: alerts, Letters: letters, Notify: noNotify{}, CreditWait: o.creditWait,
		StripeLivemode: o.liveKey, Proof: w.proof})

	w.newConsumer = func() (*consume.Consumer, *kgo.Client) {
		cl := kafkatest.NewClient(t, w.kafka, consume.ClientOpts(group, kafkax.Membership{}, kafkax.TopicWebhookPending, kafkax.TopicTransactions)...)
		c, err := consume.New(cl, h, consume.Config{Group: group, MaxPollRecords: 50, Grace: o.grace,
			Concurrency: 8, InfraBackoff: backoff.Policy{Base: 50 * time.Millisecond, Multiplier: 2, Max: time.Second, MaxAttempts: 1}},
			consume.Deps{Deps: lifecycle.Deps{Logger: logger}, Alerts: alerts, Letters: letters})
		require.NoError(t, err)
		return c, cl
	}
	t.Cleanup(func() {
		require.NoError(t, credits.Stop(context.Background()))
		w.reconcile()
	})
	w.startConsumer()
	return w
}

// startConsumer runs one more consumer of the group (a worker replica) and
// returns a function that stops it cleanly.
func (w *world) startConsumer() (stop func()) {
	c, cl := w.newConsumer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(w.t, <-done)
		// As run.go does: leave the group, so the partitions move at once
		// instead of staying with a member that no longer polls.
		cl.LeaveGroup()
	}
	w.t.Cleanup(stop)
	w.stops = append(w.stops, stop)
	return stop
}

// stopConsumers stops every consumer: the worker is down. A call in flight
// ends when Grace runs out, its answer unrecorded.
func (w *world) stopConsumers() {
	for _, stop := range w.stops {
		stop()
	}
}

func (w *world) produce(topic, key, messageID string, value []byte) {
	w.t.Helper()
	rec := &kgo.Record{Topic: topic, Key: []byte(key), Value: value, Headers: []kgo.RecordHeader{
		{Key: kafkax.HeaderMessageID, Value: []byte(messageID)},
		{Key: kafkax.HeaderCorrelationID, Value: []byte("corr-" + messageID)},
	}}
	w.sign(rec)
	require.NoError(w.t, w.producer.ProduceSync(context.Background(), rec).FirstErr())
}

// sign adds webhook-api's proof to a money event on aegis.webhook.pending
// that has none, as webhook-api does when it writes the event's outbox row.
func (w *world) sign(rec *kgo.Record) {
	var e event.PSPEvent
	if rec.Topic != kafkax.TopicWebhookPending || json.Unmarshal(rec.Value, &e) != nil || !eventproof.Required(e.Action) {
		return
	}
	for _, h := range rec.Headers {
		if h.Key == eventproof.Header {
			return
		}
	}
	rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: eventproof.Header, Value: []byte(w.proof.Sign(e))})
}

// credit publishes a verified payment event, as webhook-api and the relay would.
func (w *world) credit(eventID, reference string, amount int64) {
	w.t.Helper()
	e := w.creditEvent(eventID, reference, amount)
	b, _ := json.Marshal(e)
	w.produce(kafkax.TopicWebhookPending, w.user, e.MessageID(), b)
}

// creditEvent is the event credit publishes, for a test to alter.
func (w *world) creditEvent(eventID, reference string, amount int64) event.PSPEvent {
	live := w.live
	return event.PSPEvent{Provider: "stripe", EventID: eventID, Type: "payment_intent.succeeded", Action: event.ActionCredit,
		UserID: w.user, Amount: amount, Currency: "usd", Reference: reference, Livemode: &live, OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}
}

// createPayout inserts the payout as webhook-api does (INITIALIZED, with
// its creating transition) and returns its id.
func (w *world) createPayout(amount int64, destination, provider string) string {
	w.t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	return fixture.Payout{ID: id, UserID: w.user, Amount: amount, Destination: destination, Provider: provider,
		CorrelationID: "corr-" + id}.Insert(w.t, w.db.Pool)
}

func (w *world) requestPayout(id string, amount int64, provider string) {
	w.t.Helper()
	b, _ := json.Marshal(event.PayoutRequested{PayoutID: id, UserID: w.user, Amount: amount, Currency: "usd", Provider: provider})
	w.produce(kafkax.TopicTransactions, w.user, "payout:"+id+":request", b)
}

// pspOutcome publishes a payout outcome webhook event that matches the
// payout as the PSP has it: its amount, currency and PSP reference.
func (w *world) pspOutcome(eventID, payoutID string, action event.Action, at time.Time) {
	w.t.Helper()
	e := w.outcomeEvent(eventID, payoutID, action, at)
	w.publishOutcome(e)
}

// outcomeEvent is the event pspOutcome sends, for a test to alter.
func (w *world) outcomeEvent(eventID, payoutID string, action event.Action, at time.Time) event.PSPEvent {
	w.t.Helper()
	typ := map[event.Action]string{event.ActionPayoutPaid: "payout.paid", event.ActionPayoutFailed: "payout.failed"}[action]
	var amount int64
	var currency, ref string
	require.NoError(w.t, w.db.Pool.QueryRow(context.Background(),
		`SELECT amount, currency, coalesce(psp_reference, 'po_x') FROM payouts WHERE id = $1`, payoutID).Scan(&amount, &currency, &ref))
	live := w.live
	return event.PSPEvent{Provider: "stripe", EventID: eventID, Type: typ, Action: action, PayoutID: payoutID,
		Amount: amount, Currency: currency, Reference: ref, Livemode: &live, OccurredAt: at, Raw: json.RawMessage(`{}`)}
}

func (w *world) publishOutcome(e event.PSPEvent) {
	w.t.Helper()
	b, _ := json.Marshal(e)
	w.produce(kafkax.TopicWebhookPending, w.user, e.MessageID(), b)
}

// relay publishes the worker's pending outbox rows for topic (retries,
// dead letters, outcomes) and returns how many it moved.
func (w *world) relay(topic string) int {
	w.t.Helper()
	ctx := context.Background()
	rows, err := w.db.Pool.Query(ctx, `
		UPDATE transaction_outbox SET status = 'processed', processed_at = now(), finished_at = now()
		WHERE topic = $1 AND status = 'pending'
		RETURNING partition_key, payload, headers`, topic)
	require.NoError(w.t, err)
	type row struct {
		key     string
		payload []byte
		headers map[string]string
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.key, &x.payload, &x.headers)
		return x, err
	})
	require.NoError(w.t, err)
	for _, x := range got {
		rec := &kgo.Record{Topic: topic, Key: []byte(x.key), Value: x.payload}
		for k, v := range x.headers {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		require.NoError(w.t, w.producer.ProduceSync(ctx, rec).FirstErr())
	}
	return len(got)
}

type payoutRow struct {
	Status    payout.Status
	Attempts  int
	Reference string
	LastError string
	Class     string
}

func (w *world) payout(id string) payoutRow {
	w.t.Helper()
	var p payoutRow
	require.NoError(w.t, w.db.Pool.QueryRow(context.Background(), `
		SELECT status, attempts, coalesce(psp_reference, ''), coalesce(last_error, ''), coalesce(error_class, '')
		FROM payouts WHERE id = $1`, id).Scan(&p.Status, &p.Attempts, &p.Reference, &p.LastError, &p.Class))
	return p
}

func (w *world) waitStatus(id string, statuses ...payout.Status) payoutRow {
	w.t.Helper()
	var p payoutRow
	require.Eventually(w.t, func() bool {
		p = w.payout(id)
		for _, s := range statuses {
			if p.Status == s {
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, "payout %s never reached %v", id, statuses)
	return p
}

// waitConsumed waits until the group has committed every record on topic:
// each was handled (or dead-lettered), and none is left to deliver again.
func (w *world) waitConsumed(topic string) {
	w.t.Helper()
	adm := kadm.NewClient(w.producer)
	require.Eventually(w.t, func() bool {
		ctx := context.Background()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil || ends.Error() != nil {
			return false
		}
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil || committed.Error() != nil {
			return false
		}
		done := true
		ends.Each(func(end kadm.ListedOffset) {
			c, ok := committed.Lookup(topic, end.Partition)
			done = done && (end.Offset == 0 || ok && c.At == end.Offset)
		})
		return done
	}, 20*time.Second, 20*time.Millisecond, "the group never committed all of %s", topic)
}

// waitProcessed waits until the consumer recorded messageID as processed:
// in processed_events, or, for a credit it posted, in the credit's ledger
// transaction.
func (w *world) waitProcessed(messageID string) {
	w.t.Helper()
	require.Eventually(w.t, func() bool {
		var ok bool
		_ = w.db.Pool.QueryRow(context.Background(),
			`SELECT EXISTS (SELECT 1 FROM processed_events WHERE consumer_group = $1 AND event_id = $2)
				OR EXISTS (SELECT 1 FROM ledger_transactions WHERE kind = 'credit' AND message_id = $2)`, group, messageID).Scan(&ok)
		return ok
	}, 20*time.Second, 20*time.Millisecond, "message %s never processed", messageID)
}

func (w *world) balance() int64 {
	w.t.Helper()
	b, err := ledger.Balance(context.Background(), w.db.Pool, w.user, "usd")
	require.NoError(w.t, err)
	return b
}

func (w *world) count(query string, args ...any) int {
	w.t.Helper()
	var n int
	require.NoError(w.t, w.db.Pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

// reconcile asserts the ledger invariants: every transaction sums to zero,
// every user balance equals its entries and none is negative.
func (w *world) reconcile() {
	w.t.Helper()
	require.Zero(w.t, w.count(`SELECT count(*) FROM (SELECT 1 FROM ledger_entries GROUP BY transaction_id, currency HAVING sum(amount) <> 0) x`))
	require.Zero(w.t, w.count(`SELECT count(*) FROM wallets w WHERE kind = 'user'
		AND balance <> coalesce((SELECT sum(amount) FROM ledger_entries e WHERE e.wallet_id = w.id), 0)`))
	require.Zero(w.t, w.count(`SELECT count(*) FROM wallets WHERE kind = 'user' AND balance < 0`))
}

// deadLetter returns the dead-letter outbox row for topic's DLQ.
func (w *world) deadLetters(topic string) []map[string]string {
	w.t.Helper()
	// The handlers' letters are staged in the outbox; the sweeper's are
	// written to dead_letters directly.
	rows, err := w.db.Pool.Query(context.Background(),
		`SELECT headers FROM (
			SELECT headers, created_at AS at FROM transaction_outbox WHERE topic = $1
			UNION ALL
			SELECT headers || jsonb_build_object('error_class', error_class, 'event_type', event_type), created_at
			FROM dead_letters WHERE original_topic = $2 AND source = 'sweeper') l ORDER BY at`,
		kafkax.DLQTopic(topic), topic)
	require.NoError(w.t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[map[string]string])
	require.NoError(w.t, err)
	return out
}

func (w *world) fundWallet(amount int64) {
	w.t.Helper()
	ev := "evt_fund_" + logging.NewCorrelationID()[:8]
	w.credit(ev, "pi_"+ev, amount)
	w.waitProcessed("stripe:" + ev)
}

// noNotify: the test plays the relay itself.
type noNotify struct{}

func (noNotify) Notify() {}

// alertReceiver records the keys of the alerter's structured ALERT log
// lines (the alerter's only output: what pages is the rule on the
// condition's gauge).
type alertReceiver struct {
	mu   sync.Mutex
	keys []string
}

// Write takes one JSON log line (slog's handler writes a line a call).
func (r *alertReceiver) Write(p []byte) (int, error) {
	var line struct {
		Msg string `json:"msg"`
		Key string `json:"alert_key"`
	}
	if err := json.Unmarshal(p, &line); err == nil && strings.HasPrefix(line.Msg, "ALERT: ") {
		r.mu.Lock()
		r.keys = append(r.keys, line.Key)
		r.mu.Unlock()
	}
	return len(p), nil
}

func (r *alertReceiver) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

func id(prefix string) string { return fmt.Sprintf("%s_%s", prefix, logging.NewCorrelationID()[:10]) }
