package api_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/payouts"
)

// register registers a destination and returns its id.
func register(t *testing.T, url, token, user, provider, dest string) string {
	t.Helper()
	a := registerReq(t, url, token, user, provider, dest)
	require.Contains(t, []int{200, 201}, a.status, a.body)
	return a.body["destination_id"].(string)
}

func registerReq(t *testing.T, url, token, user, provider, dest string) answer {
	t.Helper()
	body := fmt.Sprintf(`{"provider":%q,"destination":%q}`, provider, dest)
	return post(t, url+"/v1/users/"+user+"/destinations", []byte(body), map[string]string{"Authorization": "Bearer " + token})
}

func get(t *testing.T, url, token string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	return do(t, req)
}

// A client acts only for the users in its scope: outside it, creating a
// payout, reading one, reading a wallet and touching destinations answer
// 403 and write nothing.
func TestRequestsOutsideTheClientsScopeAre403AndWriteNothing(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	url := newServerWith(t, db.Pool, []string{stripeSecret}, options{clients: "acme(user-*):" + clientToken + ",other(o-*):" + otherToken})
	dest := register(t, url, clientToken, "user-1", "stripe", "acct_123")
	a := payoutRequest(t, url, clientToken, "k1", payoutBody)
	require.Equal(t, 202, a.status, a.body)
	id := a.body["payout_id"].(string)
	fixture.Wallet{Owner: "user-1"}.Insert(t, db.Pool)
	before := count(t, db, "SELECT count(*) FROM transaction_outbox")

	forbidden := []answer{
		payoutRequest(t, url, otherToken, "k2", payoutBody),
		payoutRequest(t, url, otherToken, "k3", strings.Replace(payoutBody, `"destination":"acct_123"`, `"destination_id":"`+dest+`"`, 1)),
		get(t, url+"/v1/payouts/"+id, otherToken),
		get(t, url+"/v1/wallets/user-1", otherToken),
		get(t, url+"/v1/wallets/user-nobody", otherToken),
		registerReq(t, url, otherToken, "user-1", "stripe", "acct_attacker"),
		get(t, url+"/v1/users/user-1/destinations", otherToken),
		post(t, url+"/v1/users/user-1/destinations/"+dest+"/disable", nil, map[string]string{"Authorization": "Bearer " + otherToken}),
	}
	for i, f := range forbidden {
		require.Equal(t, 403, f.status, "request %d: %v", i, f.body)
		require.Equal(t, "forbidden", f.errorCode(), "request %d", i)
	}
	require.Equal(t, 1, count(t, db, "SELECT count(*) FROM payouts"))
	require.Equal(t, before, count(t, db, "SELECT count(*) FROM transaction_outbox"))
	require.Equal(t, 1, count(t, db, "SELECT count(*) FROM destinations WHERE status = 'active'"), "nothing registered or disabled")

	// The owner of the scope still reads what it made.
	require.Equal(t, 200, get(t, url+"/v1/payouts/"+id, clientToken).status)
	require.Equal(t, 200, get(t, url+"/v1/wallets/user-1", clientToken).status)
}

// Rotation: a client's old and new tokens both work, and an
// Idempotency-Key belongs to the client, not to the token.
func TestRotatedTokensShareTheClientsIdempotencyKeys(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	const newToken = "acme-new-token-0123456789"
	url := newServerWith(t, db.Pool, []string{stripeSecret}, options{clients: "acme(user-*):" + clientToken + ",acme:" + newToken})
	register(t, url, clientToken, "user-1", "stripe", "acct_123")
	first := payoutRequest(t, url, clientToken, "rotate-1", payoutBody)
	require.Equal(t, 202, first.status, first.body)
	again := payoutRequest(t, url, newToken, "rotate-1", payoutBody)
	require.Equal(t, 202, again.status, again.body)
	require.Equal(t, first.body["payout_id"], again.body["payout_id"], "the new token replays the old token's key")
	require.Equal(t, 1, count(t, db, "SELECT count(*) FROM payouts"))
}

func TestDestinationsAreRegisteredOnceAndPayoutsGoOnlyToActiveOnes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	// Registration is idempotent while active and says who and when.
	a := registerReq(t, b.url, clientToken, "user-1", "stripe", "acct_123")
	require.Equal(t, 201, a.status, a.body)
	id := a.body["destination_id"].(string)
	require.Equal(t, "connected_account", a.body["type"])
	require.Equal(t, "active", a.body["status"])
	require.Equal(t, "acme", a.body["created_by"])
	again := registerReq(t, b.url, otherToken, "user-1", "stripe", " acct_123 ")
	require.Equal(t, 200, again.status)
	require.Equal(t, id, again.body["destination_id"])
	require.Equal(t, 1, count(t, b.db, "SELECT count(*) FROM destinations"))

	// Shapes per provider.
	for _, bad := range []struct{ provider, dest string }{
		{"stripe", "acct_"}, {"stripe", "acct_12 3"}, {"paystack", "acct_123"},
		{"paystack", "rcp_lower"}, {"paypal", "x"}, {"stripe", "acct_" + strings.Repeat("1", 300)},
		{"stripe", "ba_" + strings.Repeat("1", 300)},
	} {
		r := registerReq(t, b.url, clientToken, "user-1", bad.provider, bad.dest)
		require.Equal(t, 400, r.status, "%s %s", bad.provider, bad.dest)
		require.Equal(t, "invalid_request", r.errorCode())
	}
	require.Equal(t, 201, registerReq(t, b.url, clientToken, "user-1", "stripe", "acct_2").status)
	require.Equal(t, 201, registerReq(t, b.url, clientToken, "user-1", "stripe", "acct_1").status)
	require.Equal(t, 201, registerReq(t, b.url, clientToken, "user-1", "paystack", "RCP_t0ya41mp35flk40").status)

	// A payout names the destination by value or by id; both must agree.
	byValue := payoutRequest(t, b.url, clientToken, "p-1", payoutBody)
	require.Equal(t, 202, byValue.status, byValue.body)
	byID := payoutRequest(t, b.url, clientToken, "p-2", `{"user_id":"user-1","amount":100,"currency":"usd","destination_id":"`+id+`","provider":"stripe"}`)
	require.Equal(t, 202, byID.status, byID.body)
	got := get(t, b.url+"/v1/payouts/"+byID.body["payout_id"].(string), clientToken)
	require.Equal(t, "acct_123", got.body["destination"])
	require.Equal(t, id, got.body["destination_id"])
	mismatch := payoutRequest(t, b.url, clientToken, "p-3", `{"user_id":"user-1","amount":100,"currency":"usd","destination":"acct_2","destination_id":"`+id+`","provider":"stripe"}`)
	require.Equal(t, 422, mismatch.status)
	require.Equal(t, "destination_not_registered", mismatch.errorCode())

	// Not registered, another user's, another provider's: 422, nothing written.
	payoutsBefore := count(t, b.db, "SELECT count(*) FROM payouts")
	for i, body := range []string{
		`{"user_id":"user-1","amount":100,"currency":"usd","destination":"acct_attacker","provider":"stripe"}`,
		`{"user_id":"user-2","amount":100,"currency":"usd","destination":"acct_123","provider":"stripe"}`,
		`{"user_id":"user-2","amount":100,"currency":"usd","destination_id":"` + id + `","provider":"stripe"}`,
	} {
		r := payoutRequest(t, b.url, clientToken, fmt.Sprintf("nr-%d", i), body)
		require.Equal(t, 422, r.status, body)
		require.Equal(t, "destination_not_registered", r.errorCode())
	}
	require.Equal(t, payoutsBefore, count(t, b.db, "SELECT count(*) FROM payouts"))

	// Disabling: recorded, idempotent, final for new payouts; payouts
	// already accepted keep their destination; a retried key still answers.
	dis := post(t, b.url+"/v1/users/user-1/destinations/"+id+"/disable", nil, map[string]string{"Authorization": "Bearer " + otherToken})
	require.Equal(t, 200, dis.status, dis.body)
	require.Equal(t, "disabled", dis.body["status"])
	require.Equal(t, "other", dis.body["disabled_by"])
	require.NotNil(t, dis.body["disabled_at"])
	require.Equal(t, 200, post(t, b.url+"/v1/users/user-1/destinations/"+id+"/disable", nil, map[string]string{"Authorization": "Bearer " + clientToken}).status)
	require.Equal(t, 404, post(t, b.url+"/v1/users/user-2/destinations/"+id+"/disable", nil, map[string]string{"Authorization": "Bearer " + clientToken}).status)
	require.Equal(t, 404, post(t, b.url+"/v1/users/user-1/destinations/nope/disable", nil, map[string]string{"Authorization": "Bearer " + clientToken}).status)
	refused := payoutRequest(t, b.url, clientToken, "p-4", payoutBody)
	require.Equal(t, 422, refused.status)
	require.Equal(t, "destination_not_registered", refused.errorCode())
	replayed := payoutRequest(t, b.url, clientToken, "p-1", payoutBody)
	require.Equal(t, 202, replayed.status, "a retried request answers its payout")
	require.Equal(t, byValue.body["payout_id"], replayed.body["payout_id"])
	var status string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT status FROM payouts WHERE id = $1`, byValue.body["payout_id"]).Scan(&status))
	require.Equal(t, "INITIALIZED", status, "disabling changes no accepted payout")

	// Registered anew after disabling: a new destination, the old one kept.
	renewed := registerReq(t, b.url, clientToken, "user-1", "stripe", "acct_123")
	require.Equal(t, 201, renewed.status)
	require.NotEqual(t, id, renewed.body["destination_id"])
	list := get(t, b.url+"/v1/users/user-1/destinations", clientToken)
	require.Equal(t, 200, list.status)
	require.Len(t, list.body["items"], 5)
	active := get(t, b.url+"/v1/users/user-1/destinations?status=disabled", clientToken)
	require.Len(t, active.body["items"], 1)
	require.Equal(t, 400, get(t, b.url+"/v1/users/user-1/destinations?status=gone", clientToken).status)
	require.Equal(t, 202, payoutRequest(t, b.url, clientToken, "p-5", payoutBody).status)
}

// Concurrent registrations of one destination make one row.
func TestConcurrentRegistrationsMakeOneDestination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = register(t, b.url, clientToken, "user-9", "paystack", "RCP_same")
		}()
	}
	wg.Wait()
	for _, id := range ids {
		require.Equal(t, ids[0], id)
	}
	require.Equal(t, 1, count(t, b.db, "SELECT count(*) FROM destinations"))
}

func TestPayoutLimits(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	url := newServerWith(t, db.Pool, []string{stripeSecret}, options{limits: payouts.Limits{
		PerPayout: map[string]int64{"usd": 1000}, Daily: map[string]int64{"usd": 1500},
	}})
	register(t, url, clientToken, "user-1", "stripe", "acct_123")
	register(t, url, clientToken, "user-2", "stripe", "acct_123")
	body := func(user string, amount int, currency string) string {
		return fmt.Sprintf(`{"user_id":%q,"amount":%d,"currency":%q,"destination":"acct_123","provider":"stripe"}`, user, amount, currency)
	}
	over := payoutRequest(t, url, clientToken, "l-1", body("user-1", 1001, "usd"))
	require.Equal(t, 422, over.status)
	require.Equal(t, "limit_exceeded", over.errorCode())
	require.Equal(t, 202, payoutRequest(t, url, clientToken, "l-2", body("user-1", 1000, "usd")).status)
	require.Equal(t, 202, payoutRequest(t, url, clientToken, "l-3", body("user-1", 500, "usd")).status)
	daily := payoutRequest(t, url, clientToken, "l-4", body("user-1", 1, "usd"))
	require.Equal(t, 422, daily.status)
	require.Equal(t, "limit_exceeded", daily.errorCode())
	require.Contains(t, daily.body["error"].(map[string]any)["message"], "24 hours")
	require.Equal(t, 202, payoutRequest(t, url, clientToken, "l-5", body("user-2", 1000, "usd")).status, "the daily limit is per user")
	require.Equal(t, 202, payoutRequest(t, url, clientToken, "l-2", body("user-1", 1000, "usd")).status, "a retried key answers its payout")
	require.Equal(t, 3, count(t, db, "SELECT count(*) FROM payouts"))

	// A payout that failed gives its room back.
	_, err := db.Pool.Exec(context.Background(), `UPDATE payouts SET status = 'FINALIZED' WHERE idempotency_key = 'l-2'`)
	require.NoError(t, err)
	require.Equal(t, 202, payoutRequest(t, url, clientToken, "l-6", body("user-1", 1000, "usd")).status)

	// Concurrent requests cannot slip under the daily limit together.
	register(t, url, clientToken, "user-3", "stripe", "acct_123")
	var wg sync.WaitGroup
	accepted := make(chan int, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if payoutRequest(t, url, clientToken, fmt.Sprintf("c-%d", i), body("user-3", 400, "usd")).status == 202 {
				accepted <- 1
			}
		}()
	}
	wg.Wait()
	close(accepted)
	require.Len(t, accepted, 3, "3 × 400 fit in 1500, a fourth does not")
}

// The safety net behind validation: data Postgres refuses is the client's
// error (ErrRefused, a 400), not a 503 it would retry forever.
func TestPayoutDataPostgresRefusesIsTheClientsError(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := payouts.NewStore(db.Pool, noopNotify{}, payouts.Limits{})
	_, _, err := store.Create(context.Background(), "acme", "k", payouts.Request{
		UserID: "user\x00", Amount: 1, Currency: "usd", Destination: "acct_1", Provider: "stripe"})
	require.ErrorIs(t, err, payouts.ErrRefused)
}

type noopNotify struct{}

func (noopNotify) Notify() {}

// A webhook that can never be stored as sent is answered 200, stored as far
// as it can be and dead-lettered with its body byte for byte; it moves no
// money, and its PSP retry is a duplicate.
func TestUnstorableWebhooksAreAnsweredAndDeadLettered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// Random, so that Postgres cannot compress it under the B-tree row
	// limit: on the partition-key index this is a 54000, not a wallet.
	longUser := "user-" + incompressible(3000)
	cases := []struct {
		name, eventID string
		body          []byte
		storedID      string
		bodyKept      bool
	}{
		{"over-long user_id", "evt_long_user", paymentIntent("evt_long_user", longUser, 5000), "evt_long_user", true},
		{"NUL in the body", "evt_nul", []byte(`{"id":"evt_nul","object":"event","created":1,"type":"payment_intent.succeeded","data":{"object":{"id":"pi_nul","amount":100,"currency":"usd","metadata":{"user_id":"user-\u0000"}}}}`), "evt_nul", false},
		{"unpaired surrogate", "evt_sur", []byte(`{"id":"evt_sur","object":"event","created":1,"type":"customer.created","data":{"object":{"id":"cus_1","name":"\ud800"}}}`), "evt_sur", false},
		{"over-long event id", strings.Repeat("e", 4000), paymentIntent(strings.Repeat("e", 4000), "user-1", 100), "", true},
	}
	for _, c := range cases {
		a := post(t, b.url+"/webhooks/stripe", c.body, stripeHeaders(c.body, stripeSecret, time.Now()))
		require.Equal(t, 200, a.status, "%s: %v", c.name, a.body)
		require.Equal(t, "dead_lettered", a.body["status"], c.name)
		stored := a.body["event_id"].(string)
		if c.storedID != "" {
			require.Equal(t, c.storedID, stored, c.name)
		} else {
			require.True(t, strings.HasPrefix(stored, "sha256:"), c.name)
		}
		var payload []byte
		var format, reason, class string
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT payload, headers->>'payload_format', error, error_class
			FROM dead_letters WHERE correlation_id = (SELECT correlation_id FROM webhook_events WHERE event_id = $1)`, stored).
			Scan(&payload, &format, &reason, &class), c.name)
		require.Equal(t, c.body, payload, "%s: the body is kept byte for byte", c.name)
		require.Equal(t, "psp_webhook", format)
		require.Equal(t, "permanent", class)
		require.Contains(t, reason, "cannot be stored as sent", c.name)
		var inbox []byte
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT payload::text FROM webhook_events WHERE event_id = $1`, stored).Scan(&inbox))
		if c.bodyKept {
			require.JSONEq(t, string(c.body), string(inbox), c.name)
		} else {
			require.Contains(t, string(inbox), "body_sha256", c.name)
		}
		// The PSP retries: a duplicate, nothing new.
		again := post(t, b.url+"/webhooks/stripe", c.body, stripeHeaders(c.body, stripeSecret, time.Now()))
		require.Equal(t, 200, again.status)
		require.Equal(t, "duplicate", again.body["status"], c.name)
	}
	require.Equal(t, len(cases), count(t, b.db, "SELECT count(*) FROM webhook_events"))
	require.Equal(t, len(cases), count(t, b.db, "SELECT count(*) FROM dead_letters"))
	require.Zero(t, count(t, b.db, "SELECT count(*) FROM transaction_outbox"), "never published, so never credited")
	require.Zero(t, count(t, b.db, "SELECT count(*) FROM psp_objects"))
}

// incompressible is n random hex characters.
func incompressible(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// Stripe's created time in the future beyond the tolerance is refused like
// a stale signature, and stores nothing.
func TestStripeEventCreatedInTheFutureIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := []byte(fmt.Sprintf(`{"id":"evt_future","object":"event","created":%d,"type":"payment_intent.succeeded","data":{"object":{"id":"pi_f","amount":100,"amount_received":100,"currency":"usd","metadata":{"user_id":"user-1"}}}}`,
		time.Now().Add(10*time.Minute).Unix()))
	a := post(t, b.url+"/webhooks/stripe", body, stripeHeaders(body, stripeSecret, time.Now()))
	require.Equal(t, 401, a.status)
	require.Equal(t, "timestamp_out_of_tolerance", a.errorCode())
	require.Zero(t, count(t, b.db, "SELECT count(*) FROM webhook_events"))
	require.Zero(t, count(t, b.db, "SELECT count(*) FROM psp_objects"))
}

// lockedBuffer is a log destination safe for concurrent handlers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the log lines with msg.
func (l *lockedBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		if strings.HasPrefix(fmt.Sprint(m["msg"]), msg) {
			out = append(out, m)
		}
	}
	return out
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Refused webhooks are counted one by one but logged at most once a
// minute per provider, the next line saying how many came in between.
func TestRefusedWebhooksAreLoggedAtMostOncePerInterval(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	logs := &lockedBuffer{}
	clk := &clock{t: time.Now()}
	url := newServerWith(t, db.Pool, []string{stripeSecret}, options{logs: logs, now: clk.now})
	body := paymentIntent("evt_x", "user-1", 1)
	for i := range 30 {
		h := stripeHeaders(body, "whsec_attacker", time.Now())
		if i%3 == 0 {
			h = nil
		}
		require.Equal(t, 401, post(t, url+"/webhooks/stripe", body, h).status)
	}
	ps := []byte(`{"event":"charge.success","data":{"id":1}}`)
	require.Equal(t, 401, post(t, url+"/webhooks/paystack", ps, map[string]string{"x-paystack-signature": "00"}).status)
	lines := logs.lines(t, "webhooks refused")
	require.Len(t, lines, 2, "one line per provider in the interval")

	clk.advance(61 * time.Second)
	require.Equal(t, 401, post(t, url+"/webhooks/stripe", body, nil).status)
	lines = logs.lines(t, "webhooks refused")
	require.Len(t, lines, 3)
	last := lines[2]
	require.Equal(t, "stripe", last["provider"])
	require.EqualValues(t, 29, last["refused_since_last_line"])
	byReason := last["refused_since_last_line_by_reason"].(map[string]any)
	require.EqualValues(t, 20, byReason["invalid_signature"])
	require.EqualValues(t, 9, byReason["missing_signature"])

	// Every refusal is counted.
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	metrics, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, want := range []string{
		`aegis_webhooks_refused_total{provider="stripe",reason="invalid_signature"} 20`,
		`aegis_webhooks_refused_total{provider="stripe",reason="missing_signature"} 11`,
		`aegis_webhooks_refused_total{provider="paystack",reason="invalid_signature"} 1`,
	} {
		require.Contains(t, string(metrics), want)
	}
}
