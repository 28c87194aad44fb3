package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/paystackapi"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/psptest"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/api"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/clients"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/destinations"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/payouts"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/verify"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/wallets"
)

const (
	stripeSecret   = "whsec_test_secret"
	paystackSecret = "sk_test_paystack"
	clientToken    = "client-token-0123456789"
)

type bundle struct {
	db  *pgtest.DB
	url string
}

// testClients: acme and other both act for user-*; acme also for alice,
// other also for o-*.
const testClients = "acme(user-*|alice):" + clientToken + ",other(user-*|o-*):" + otherToken

const otherToken = "other-token-0123456789"

// options vary the server a test runs against.
type options struct {
	clients string
	limits  payouts.Limits
	logs    io.Writer
	now     func() time.Time
	// commit sizes the committer (default: 2 committers of 16).
	commit ingest.CommitterConfig
	// commitClock is the committer's clock (default time.Now).
	commitClock func() time.Time
	// pspURL is where destinations are checked (default: a stand-in
	// started for the test).
	pspURL string
	// paystack enables Paystack payouts (only Stripe's by default).
	paystack bool
}

func newServer(t *testing.T, pool *pgxpool.Pool, stripeSecrets []string) string {
	t.Helper()
	return newServerWith(t, pool, stripeSecrets, options{})
}

func newServerWith(t *testing.T, pool *pgxpool.Pool, stripeSecrets []string, o options) string {
	t.Helper()
	if o.clients == "" {
		o.clients = testClients
	}
	if o.logs == nil {
		o.logs = io.Discard
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.pspURL == "" {
		o.pspURL = psptest.Start(t, map[string]string{"PSP_PAYSTACK_SECRET_KEY": paystackSecret}).URL
	}
	pspHTTP := &http.Client{Timeout: 10 * time.Second}
	checker := destinations.Checker{Stripe: stripeapi.New("sk_test_aegis", o.pspURL, pspHTTP),
		Paystack: paystackapi.New(paystackSecret, o.pspURL, pspHTTP)}
	logger := slog.New(slog.NewJSONHandler(o.logs, nil))
	set, err := clients.Parse(o.clients)
	require.NoError(t, err)
	reg := httpserver.NewRegistry()
	r := httpserver.NewRouter(logger, reg)
	notify := notifier(t, pool)
	api.Mount(r, api.Deps{
		Logger: logger, Ingest: committer(t, pool, notify, o.commit, o.commitClock), Payouts: payouts.NewStore(pool, notify, o.limits).WithClock(o.now),
		Destinations: destinations.NewStore(pool), Checker: checker, Wallets: wallets.NewStore(pool), Stripe: verify.NewStripe(stripeSecrets),
		Paystack: verify.NewPaystack(paystackSecret), Clients: set, Webhooks: api.NewWebhookMetric(reg),
		Refused:         api.NewRefusalLog(logger, reg, time.Minute, o.now),
		Shed:            api.NewShedLog(logger, reg, time.Minute, o.now),
		Reading:         api.NewReading(api.DefaultReadingMax, reg),
		ProviderEnabled: func(p string) bool { return p == "stripe" || (o.paystack && p == "paystack") }, Now: time.Now,
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv.URL
}

// notifier is the production relay wake-up (nothing listens in these tests).
func notifier(t *testing.T, pool *pgxpool.Pool) *outbox.Notifier {
	t.Helper()
	n := outbox.NewNotifier(pool, outbox.NotifyInterval, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = n.Run(ctx); close(done) }() // Run ends with ctx; the test asserts on what it delivered
	t.Cleanup(func() { cancel(); <-done })
	return n
}

// committer is the production ingest path: webhooks committed in groups.
func committer(t *testing.T, pool *pgxpool.Pool, notify *outbox.Notifier, cfg ingest.CommitterConfig, clock func() time.Time) *ingest.Committer {
	t.Helper()
	if cfg.Workers == 0 {
		// A line long enough that no test is shed on a slow machine (the
		// overload test sizes its own).
		cfg = ingest.CommitterConfig{Workers: 2, MaxGroup: 16, MinLine: 1024, Budget: time.Hour}
	}
	c, err := ingest.NewCommitter(ingest.NewStore(pool, notify, time.Now), cfg, lifecycle.Deps{Clock: clock})
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, c.Stop(context.Background())) })
	return c
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := pgtest.New(t)
	return bundle{db: db, url: newServer(t, db.Pool, []string{"whsec_previous", stripeSecret})}
}

type answer struct {
	status int
	body   map[string]any
}

func (a answer) errorCode() string {
	e, _ := a.body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func post(t *testing.T, url string, body []byte, headers map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body map[string]any
	require.NoError(t, json.Unmarshal(raw, &body), "every answer is JSON: %s", raw)
	if resp.StatusCode >= 400 {
		e, ok := body["error"].(map[string]any)
		require.True(t, ok, "error answers use the contract shape: %s", raw)
		require.NotEmpty(t, e["code"])
		require.NotEmpty(t, e["message"])
	}
	return answer{resp.StatusCode, body}
}

func paymentIntent(eventID, userID string, amount int) []byte {
	meta := `{}`
	if userID != "" {
		meta = fmt.Sprintf(`{"user_id":%q}`, userID)
	}
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2024-06-20","created":%d,"type":"payment_intent.succeeded","data":{"object":{"id":"pi_%s","object":"payment_intent","amount":%d,"amount_received":%d,"currency":"usd","status":"succeeded","metadata":%s}}}`,
		eventID, time.Now().Unix(), eventID, amount, amount, meta))
}

func stripeHeaders(body []byte, secret string, at time.Time) map[string]string {
	return map[string]string{"Stripe-Signature": verify.SignStripe(secret, body, at), "Content-Type": "application/json"}
}

func count(t *testing.T, db *pgtest.DB, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func TestStripeWebhookIsCommittedWithItsOutboxRowOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := paymentIntent("evt_a1", "user-1", 5000)

	a := post(t, b.url+"/webhooks/stripe", body, stripeHeaders(body, stripeSecret, time.Now()))
	require.Equal(t, 200, a.status, a.body)
	require.Equal(t, "accepted", a.body["status"])

	var topic, key, action, user, corr string
	var amount int64
	err := b.db.Pool.QueryRow(context.Background(), `
		SELECT topic, partition_key, payload->>'action', payload->>'user_id', (payload->>'amount')::bigint, headers->>'correlation_id'
		FROM transaction_outbox`).Scan(&topic, &key, &action, &user, &amount, &corr)
	require.NoError(t, err)
	require.Equal(t, "aegis.webhook.pending", topic)
	require.Equal(t, "user-1", key)
	require.Equal(t, "credit", action)
	require.Equal(t, "user-1", user)
	require.EqualValues(t, 5000, amount)
	require.NotEmpty(t, corr)

	// The PSP retries: 200 again, nothing new stored.
	a = post(t, b.url+"/webhooks/stripe", body, stripeHeaders(body, "whsec_previous", time.Now()))
	require.Equal(t, 200, a.status)
	require.Equal(t, "duplicate", a.body["status"])
	require.Equal(t, 1, count(t, b.db, "SELECT count(*) FROM webhook_events"))
	require.Equal(t, 1, count(t, b.db, "SELECT count(*) FROM transaction_outbox"))
}

func TestStripeWebhookBadInputStoresNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := paymentIntent("evt_b1", "user-1", 100)
	malformed := []byte(`{"id":"evt_b2","type":`)
	huge := append([]byte(`{"id":"evt_b3","type":"x","data":{"object":{"pad":"`), bytes.Repeat([]byte("a"), api.MaxWebhookBody)...)
	huge = append(huge, []byte(`"}}}`)...)

	cases := []struct {
		name    string
		body    []byte
		headers map[string]string
		status  int
		code    string
	}{
		{"no signature", body, nil, 401, "missing_signature"},
		{"wrong secret", body, stripeHeaders(body, "whsec_attacker", time.Now()), 401, "invalid_signature"},
		{"tampered", body, stripeHeaders(paymentIntent("evt_b1", "user-1", 999999), stripeSecret, time.Now()), 401, "invalid_signature"},
		{"stale timestamp", body, stripeHeaders(body, stripeSecret, time.Now().Add(-10*time.Minute)), 401, "timestamp_out_of_tolerance"},
		{"malformed but signed", malformed, stripeHeaders(malformed, stripeSecret, time.Now()), 400, "malformed_event"},
		{"over 1 MiB", huge, stripeHeaders(huge, stripeSecret, time.Now()), 413, "payload_too_large"},
	}
	for _, tc := range cases {
		a := post(t, b.url+"/webhooks/stripe", tc.body, tc.headers)
		require.Equal(t, tc.status, a.status, tc.name)
		require.Equal(t, tc.code, a.errorCode(), tc.name)
	}
	require.Zero(t, count(t, b.db, "SELECT count(*) FROM webhook_events"))
	require.Zero(t, count(t, b.db, "SELECT count(*) FROM transaction_outbox"))
}

func TestWebhookWithoutSecretAnswers503(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	url := newServer(t, db.Pool, nil)
	body := paymentIntent("evt_c1", "u", 1)
	a := post(t, url+"/webhooks/stripe", body, stripeHeaders(body, stripeSecret, time.Now()))
	require.Equal(t, 503, a.status)
	require.Equal(t, "provider_not_configured", a.errorCode())
}

func TestWebhookAnswers503WhenPostgresCannotCommit(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:5432/aegis_no_such_database?sslmode=disable")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	url := newServer(t, pool, []string{stripeSecret})
	body := paymentIntent("evt_d1", "u", 1)
	a := post(t, url+"/webhooks/stripe", body, stripeHeaders(body, stripeSecret, time.Now()))
	require.Equal(t, 503, a.status, "the PSP must retry: nothing was committed")
	require.Equal(t, "unavailable", a.errorCode())
}

func TestPaymentWithoutUserIsStoredAndDeadLettered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := paymentIntent("evt_e1", "", 2500)
	a := post(t, b.url+"/webhooks/stripe", body, stripeHeaders(body, stripeSecret, time.Now()))
	require.Equal(t, 200, a.status, "never a 5xx the PSP would retry forever")
	require.Equal(t, "dead_lettered", a.body["status"])
	require.Equal(t, 1, count(t, b.db, "SELECT count(*) FROM webhook_events"))
	require.Zero(t, count(t, b.db, "SELECT count(*) FROM transaction_outbox"))
	var source, class, reason string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		"SELECT source, error_class, error FROM dead_letters").Scan(&source, &class, &reason))
	require.Equal(t, "ingest", source)
	require.Equal(t, "permanent", class)
	require.Contains(t, reason, "metadata.user_id")
}

func TestPaystackWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := []byte(`{"event":"charge.success","data":{"id":4099,"reference":"ref-1","amount":150000,"currency":"NGN","status":"success","metadata":{"user_id":"user-ng"}}}`)
	sig := map[string]string{"x-paystack-signature": verify.SignPaystack(paystackSecret, body)}

	a := post(t, b.url+"/webhooks/paystack", body, sig)
	require.Equal(t, 200, a.status, a.body)
	require.Equal(t, "charge.success:4099", a.body["event_id"])
	// A captured Paystack webhook replayed later changes nothing.
	a = post(t, b.url+"/webhooks/paystack", body, sig)
	require.Equal(t, "duplicate", a.body["status"])

	a = post(t, b.url+"/webhooks/paystack", body, map[string]string{"x-paystack-signature": verify.SignPaystack("sk_wrong", body)})
	require.Equal(t, 401, a.status)
	require.Equal(t, 1, count(t, b.db, "SELECT count(*) FROM transaction_outbox WHERE partition_key = 'user-ng'"))
}

func payoutRequest(t *testing.T, url, token, key string, body string) answer {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return post(t, url+"/v1/payouts", []byte(body), h)
}

const payoutBody = `{"user_id":"user-1","amount":1500,"currency":"USD","destination":"acct_123","provider":"stripe"}`

func TestCreatePayoutIsIdempotentPerKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.url, clientToken, "user-1", "stripe", "acct_123")
	a := payoutRequest(t, b.url, clientToken, "key-1", payoutBody)
	require.Equal(t, 202, a.status, a.body)
	require.Equal(t, "INITIALIZED", a.body["status"])
	id := a.body["payout_id"].(string)

	again := payoutRequest(t, b.url, clientToken, "key-1", payoutBody)
	require.Equal(t, 202, again.status)
	require.Equal(t, id, again.body["payout_id"], "same key and body answers the same payout")

	other := payoutRequest(t, b.url, clientToken, "key-1", strings.Replace(payoutBody, "1500", "1600", 1))
	require.Equal(t, 422, other.status)
	require.Equal(t, "idempotency_key_reused", other.errorCode())

	// Keys are per client: another client's key-1 is its own payout.
	mine := payoutRequest(t, b.url, otherToken, "key-1", payoutBody)
	require.Equal(t, 202, mine.status)
	require.NotEqual(t, id, mine.body["payout_id"])

	require.Equal(t, 2, count(t, b.db, "SELECT count(*) FROM payouts"))
	require.Equal(t, 2, count(t, b.db, "SELECT count(*) FROM transaction_outbox WHERE topic = 'aegis.transactions' AND event_type = 'payout.requested'"))

	req, _ := http.NewRequest(http.MethodGet, b.url+"/v1/payouts/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+clientToken)
	got := do(t, req)
	require.Equal(t, 200, got.status)
	require.Equal(t, "usd", got.body["currency"])
	require.Equal(t, "INITIALIZED", got.body["status"])
	history := got.body["history"].([]any)
	require.Len(t, history, 1)
	require.Equal(t, "INITIALIZED", history[0].(map[string]any)["to"])
	require.Equal(t, []any{}, got.body["psp_requests"])
	require.Equal(t, []any{}, got.body["evidence"])

	// What the worker recorded about the PSP is shown: its requests and the
	// outcome events that named the payout, with their verdicts.
	fixture.Attempt{PayoutID: id, Attempt: 0, Kind: "create", IdempotencyKey: "aegis-payout-x", Outcome: "unknown", Error: "stripe: timeout"}.Insert(t, b.db.Pool)
	fixture.Attempt{PayoutID: id, Attempt: 1, Kind: "lookup", Outcome: "not_found"}.Insert(t, b.db.Pool)
	fixture.Evidence{PayoutID: id, EventID: "evt_1", EventType: "payout.failed", Amount: 1, Currency: "usd", PSPReference: "po_1",
		Verdict: "outcome_mismatch", Reason: "amount 1, payout's 1500"}.Insert(t, b.db.Pool)
	got = do(t, req.Clone(context.Background()))
	require.Equal(t, 200, got.status)
	reqs := got.body["psp_requests"].([]any)
	require.Len(t, reqs, 2)
	require.Equal(t, "aegis-payout-x", reqs[0].(map[string]any)["idempotency_key"])
	require.Equal(t, "unknown", reqs[0].(map[string]any)["outcome"])
	require.Equal(t, "not_found", reqs[1].(map[string]any)["outcome"])
	ev := got.body["evidence"].([]any)
	require.Len(t, ev, 1)
	require.Equal(t, "outcome_mismatch", ev[0].(map[string]any)["verdict"])
	require.Equal(t, "amount 1, payout's 1500", ev[0].(map[string]any)["reason"])

	req, _ = http.NewRequest(http.MethodGet, b.url+"/v1/payouts/01930000-0000-7000-8000-000000000000", nil)
	req.Header.Set("Authorization", "Bearer "+clientToken)
	require.Equal(t, 404, do(t, req).status)
}

func TestConcurrentRequestsWithOneKeyMakeOnePayout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.url, clientToken, "user-1", "stripe", "acct_123")
	var wg sync.WaitGroup
	ids := make(chan any, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := payoutRequest(t, b.url, clientToken, "race-key", payoutBody)
			if a.status == 202 {
				ids <- a.body["payout_id"]
			}
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[any]bool{}
	for id := range ids {
		seen[id] = true
	}
	require.Len(t, seen, 1)
	require.Equal(t, 1, count(t, b.db, "SELECT count(*) FROM payouts"))
	require.Equal(t, 1, count(t, b.db, "SELECT count(*) FROM transaction_outbox"))
}

func TestPayoutBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name, token, key, body string
		status                 int
		code                   string
	}{
		{"no token", "", "k", payoutBody, 401, "unauthorized"},
		{"bad token", "nope-nope-nope-nope", "k", payoutBody, 401, "unauthorized"},
		{"no key", clientToken, "", payoutBody, 400, "idempotency_key_required"},
		{"not json", clientToken, "k", `{"user_id":`, 400, "invalid_json"},
		{"unknown field", clientToken, "k", `{"user_id":"u","amount":1,"currency":"usd","destination":"d","provider":"stripe","ammount":2}`, 400, "invalid_json"},
		{"NUL in user_id", clientToken, "k", `{"user_id":"user-\u0000","amount":1,"currency":"usd","destination":"acct_1","provider":"stripe"}`, 400, "invalid_request"},
		{"long user_id", clientToken, "k", `{"user_id":"user-` + strings.Repeat("x", 3000) + `","amount":1,"currency":"usd","destination":"acct_1","provider":"stripe"}`, 400, "invalid_request"},
		{"no destination", clientToken, "k", `{"user_id":"user-1","amount":1,"currency":"usd","provider":"stripe"}`, 400, "invalid_request"},
		{"bad destination id", clientToken, "k", `{"user_id":"user-1","amount":1,"currency":"usd","destination_id":"nope","provider":"stripe"}`, 400, "invalid_request"},
		{"negative amount", clientToken, "k", `{"user_id":"u","amount":-1,"currency":"usd","destination":"d","provider":"stripe"}`, 400, "invalid_request"},
		{"bad currency", clientToken, "k", `{"user_id":"u","amount":1,"currency":"dollars","destination":"d","provider":"stripe"}`, 400, "invalid_request"},
		{"disabled provider", clientToken, "k", `{"user_id":"u","amount":1,"currency":"ngn","destination":"RCP_1","provider":"paystack"}`, 400, "invalid_request"},
		{"unknown provider", clientToken, "k", `{"user_id":"u","amount":1,"currency":"usd","destination":"d","provider":"paypal"}`, 400, "invalid_request"},
	}
	for _, tc := range cases {
		a := payoutRequest(t, b.url, tc.token, tc.key, tc.body)
		require.Equal(t, tc.status, a.status, tc.name)
		require.Equal(t, tc.code, a.errorCode(), tc.name)
	}
	require.Zero(t, count(t, b.db, "SELECT count(*) FROM payouts"))
	require.Zero(t, count(t, b.db, "SELECT count(*) FROM transaction_outbox"))
}

func TestGetWallet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	get := func(path string) answer {
		req, _ := http.NewRequest(http.MethodGet, b.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+clientToken)
		return do(t, req)
	}
	require.Equal(t, 404, get("/v1/wallets/user-w").status)

	fixture.Wallet{Owner: "user-w", Balance: 700, Reference: "stripe:pi_1"}.Insert(t, b.db.Pool)

	a := get("/v1/wallets/user-w")
	require.Equal(t, 200, a.status, a.body)
	require.EqualValues(t, 700, a.body["balance"])
	require.Equal(t, "usd", a.body["currency"])
	entries := a.body["entries"].([]any)
	require.Len(t, entries, 1)
	require.Equal(t, "stripe:pi_1", entries[0].(map[string]any)["reference"])
	require.Equal(t, 404, get("/v1/wallets/user-w?currency=eur").status)
	require.Equal(t, 400, get("/v1/wallets/user-w?limit=0").status)
}

func payoutEvent(eventID, typ, payoutObject string, created time.Time) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","created":%d,"type":%q,"data":{"object":{"id":%q,"object":"payout","amount":700,"currency":"usd","status":%q,"metadata":{"payout_id":"p-1"}}}}`,
		eventID, created.Unix(), typ, payoutObject, strings.TrimPrefix(typ, "payout.")))
}

// Payout outcome events are not judged stale at the front door: webhook-api
// cannot tell a genuine event from a signed one that does not match its
// payout (the worker refuses those), and a forged one dated ahead would make
// the genuine event that follows look stale, its payout stuck in
// AWAITING_RESPONSE. Every one is accepted and published unflagged; the
// worker orders them against the events it applied.
func TestPayoutOutcomesAreNeverMarkedStaleAtTheFrontDoor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	forged := bytes.Replace(payoutEvent("evt_forged", "payout.paid", "po_9", now.Add(time.Minute)),
		[]byte(`"amount":700`), []byte(`"amount":1`), 1)
	genuine := payoutEvent("evt_failed", "payout.failed", "po_9", now)
	oldPaid := payoutEvent("evt_paid_retry", "payout.paid", "po_9", now.Add(-time.Hour))

	for _, body := range [][]byte{forged, genuine, oldPaid} {
		a := post(t, b.url+"/webhooks/stripe", body, stripeHeaders(body, stripeSecret, time.Now()))
		require.Equal(t, 200, a.status, a.body)
		require.Equal(t, "accepted", a.body["status"], "%s", body)
	}
	var stale int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM transaction_outbox WHERE (payload->>'stale')::bool`).Scan(&stale))
	require.Zero(t, stale, "the worker decides what is stale, on the events it applied")
	var published, tracked int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM transaction_outbox WHERE payload->>'reference' = 'po_9'`).Scan(&published))
	require.Equal(t, 3, published)
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM psp_objects WHERE provider = 'stripe' AND object_id = 'po_9'`).Scan(&tracked))
	require.Zero(t, tracked, "payout objects are not tracked by ingest")
}

// Credits (and events we do not act on) are still ordered at the front
// door: an older event about a payment is stored, published flagged stale
// and answered "stale".
func TestOutOfOrderPaymentEventsAreStoredButMarkedStale(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	event := func(id string, at time.Time) []byte {
		return []byte(fmt.Sprintf(`{"id":%q,"object":"event","created":%d,"type":"payment_intent.succeeded","data":{"object":{"id":"pi_9","object":"payment_intent","amount":100,"amount_received":100,"currency":"usd","status":"succeeded","metadata":{"user_id":"user-1"}}}}`,
			id, at.Unix()))
	}
	newer, older := event("evt_pi_new", now), event("evt_pi_old", now.Add(-time.Hour))
	a := post(t, b.url+"/webhooks/stripe", newer, stripeHeaders(newer, stripeSecret, time.Now()))
	require.Equal(t, "accepted", a.body["status"], a.body)
	a = post(t, b.url+"/webhooks/stripe", older, stripeHeaders(older, stripeSecret, time.Now()))
	require.Equal(t, 200, a.status, "a stale event is acknowledged, never retried forever")
	require.Equal(t, "stale", a.body["status"])
	var latest string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT event_id FROM psp_objects WHERE provider = 'stripe' AND object_id = 'pi_9'`).Scan(&latest))
	require.Equal(t, "evt_pi_new", latest, "the object's latest state is the newest event")
}

// TestConcurrentWebhooksCommitInGroupsWithTheirOwnOutcomes: many webhooks
// at once — some duplicates of each other, one body Postgres cannot store —
// each get their own answer, and a bad one does not fail its group.
func TestConcurrentWebhooksCommitInGroupsWithTheirOwnOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 120
	var wg sync.WaitGroup
	statuses := make([]string, n)
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every event is sent twice at the same time by "the PSP".
			body := paymentIntent(fmt.Sprintf("evt_g_%d", i/2), fmt.Sprintf("user-%d", i%7), 100)
			a := post(t, b.url+"/webhooks/stripe", body, stripeHeaders(body, stripeSecret, time.Now()))
			codes[i], statuses[i] = a.status, fmt.Sprint(a.body["status"])
		}()
	}
	// Signed bodies Postgres cannot store as sent: a NUL escape (caught
	// before the transaction) and a number beyond numeric's range (caught
	// by Postgres refusing the group: the safety net). Each is answered and
	// dead-lettered without failing its group.
	bad := [][]byte{
		[]byte(`{"id":"evt_nul","object":"event","created":1,"type":"customer.created","data":{"object":{"id":"cus_1","name":"a\u0000b"}}}`),
		[]byte(`{"id":"evt_huge","object":"event","created":1,"type":"customer.created","data":{"object":{"id":"cus_2","balance":1e1000000}}}`),
	}
	badStatus := make([]string, len(bad))
	for i, body := range bad {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := post(t, b.url+"/webhooks/stripe", body, stripeHeaders(body, stripeSecret, time.Now()))
			require.Equal(t, 200, a.status, a.body)
			badStatus[i] = fmt.Sprint(a.body["status"])
		}()
	}
	wg.Wait()
	accepted, duplicates := 0, 0
	for i := range n {
		require.Equal(t, 200, codes[i], "webhook %d", i)
		switch statuses[i] {
		case "accepted":
			accepted++
		case "duplicate":
			duplicates++
		}
	}
	require.Equal(t, n/2, accepted)
	require.Equal(t, n/2, duplicates)
	require.Equal(t, []string{"dead_lettered", "dead_lettered"}, badStatus)
	require.Equal(t, n/2+len(bad), count(t, b.db, "SELECT count(*) FROM webhook_events"))
	require.Equal(t, n/2, count(t, b.db, "SELECT count(*) FROM transaction_outbox"))
	require.Equal(t, len(bad), count(t, b.db, "SELECT count(*) FROM dead_letters WHERE headers->>'payload_format' = 'psp_webhook'"))
	var reason string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT error FROM dead_letters d JOIN webhook_events e
		ON e.correlation_id = d.correlation_id WHERE e.event_id = 'evt_huge'`).Scan(&reason))
	require.Contains(t, reason, "postgres refused it (22003")
}

// A body of unknown length (chunked) is read as it arrives, within the
// same limits as one that declares its length: a large signed one is
// accepted, one over 1 MiB is refused with 413.
func TestChunkedWebhookBodiesAreReadWithinTheLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	chunked := func(body []byte, headers map[string]string) answer {
		req, err := http.NewRequest(http.MethodPost, b.url+"/webhooks/stripe", io.MultiReader(bytes.NewReader(body)))
		require.NoError(t, err)
		req.ContentLength = -1 // sent chunked
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		return do(t, req)
	}
	pad := strings.Repeat("x", 200<<10)
	large := []byte(strings.Replace(string(paymentIntent("evt_chunked", "user-1", 100)), `"metadata":{`, `"metadata":{"pad":"`+pad+`",`, 1))
	a := chunked(large, stripeHeaders(large, stripeSecret, time.Now()))
	require.Equal(t, http.StatusOK, a.status, a.body)
	huge := append(large, bytes.Repeat([]byte(" "), api.MaxWebhookBody)...)
	a = chunked(huge, stripeHeaders(huge, stripeSecret, time.Now()))
	require.Equal(t, http.StatusRequestEntityTooLarge, a.status, a.body)
	require.Equal(t, 1, count(t, b.db, "SELECT count(*) FROM webhook_events"))
}
