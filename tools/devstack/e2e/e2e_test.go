package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/tools/devstack/internal/published"
	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

const module = "github.com/aegis-payments/aegis/"

// buffer collects the stack's log stream; it is printed when a test fails.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

type suite struct {
	t       *testing.T
	db      *pgtest.DB
	stack   *stack.Stack
	cfg     stack.Config
	api     string
	dlq     string
	psp     string
	token   string
	opToken string
	logs    *buffer
}

func start(t *testing.T) *suite { return startWith(t, "300ms", nil) }

// startWith starts the suite with the PSP stand-in's settle delay ("0":
// never on its own) and extra environment for every service.
func startWith(t *testing.T, settleDelay string, env map[string]string) *suite {
	t.Helper()
	bin := binaries(t)
	db := pgtest.New(t)
	// The relay deletes what it publishes; the tests read what it published.
	require.NoError(t, published.Keep(t.Context(), db.Pool))
	redisURL := os.Getenv("TEST_REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	allEnv := map[string]string{"RELAY_POLL_INTERVAL": "100ms", "PSP_BACKOFF_BASE": "200ms"}
	for k, v := range env {
		allEnv[k] = v
	}
	ports := proctest.FreePorts(t, 6)
	cfg := stack.Config{
		BinDir: bin,
		Ports: stack.Ports{WebhookAPI: ports[0], OutboxRelay: ports[1], PayoutWorker: ports[2],
			DLQAdmin: ports[3], Kafka: ports[4], PSP: ports[5]},
		Secrets:        stack.DevSecrets(),
		DatabaseURL:    db.URL,
		RedisURL:       redisURL,
		PSPSettleDelay: settleDelay,
		Env:            allEnv,
	}
	logs := &buffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := stack.Start(ctx, cfg, logs)
	if err != nil {
		t.Fatalf("start the stack: %v\n%s", err, logs.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- database at the failure ---\n%s", dumpTables(db))
		}
		err := s.Stop(30 * time.Second)
		if t.Failed() || err != nil {
			t.Logf("--- stack log ---\n%s", logs.String())
		}
		require.NoError(t, err, "every process exits cleanly on SIGTERM")
		// Each service has only its own role's grants (migrations
		// 000016): a statement outside them is refused and logged.
		require.NotContains(t, logs.String(), "permission denied", "a service ran a statement its role is not granted")
	})
	// Each service connects as its own role, not as the schema owner.
	require.Eventually(t, func() bool {
		rows, err := db.Pool.Query(context.Background(), `SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = $1`, db.Name)
		if err != nil {
			return false
		}
		users, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return false
		}
		for _, role := range migrations.ServiceRoles() {
			if !slices.Contains(users, role) {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "each service connects as its own role")
	return &suite{t: t, db: db, stack: s, cfg: cfg, api: stack.URL(cfg.Ports.WebhookAPI), dlq: stack.URL(cfg.Ports.DLQAdmin),
		psp: stack.URL(cfg.Ports.PSP), token: "dev-api-token-0123456789", opToken: "dev-ops-token-0123456789", logs: logs}
}

// dumpTables is the rows of the tables that say where a payment or payout
// stopped (payloads left out), for a failed test's log.
func dumpTables(db *pgtest.DB) string {
	var b strings.Builder
	for _, q := range []string{
		`SELECT to_jsonb(t) - 'payload' - 'headers' - 'retry_history' FROM transaction_outbox t ORDER BY id LIMIT 50`,
		`SELECT to_jsonb(t) FROM payouts t LIMIT 50`,
		`SELECT to_jsonb(t) FROM processed_events t LIMIT 50`,
		`SELECT to_jsonb(t) - 'payload' FROM dead_letters t LIMIT 50`,
		`SELECT to_jsonb(t) FROM wallets t LIMIT 50`,
	} {
		fmt.Fprintf(&b, "%s\n", q)
		rows, err := db.Pool.Query(context.Background(), q)
		if err != nil {
			fmt.Fprintf(&b, "  %v\n", err)
			continue
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			fmt.Fprintf(&b, "  %v\n", err)
		}
		for _, l := range lines {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	return b.String()
}

// stackLog is what the stack's processes have written so far.
func (s *suite) stackLog() string { return s.logs.String() }

type answer struct {
	status int
	body   map[string]any
	raw    string
}

func (s *suite) do(method, url string, body []byte, headers map[string]string) answer {
	s.t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(s.t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return answer{resp.StatusCode, m, string(raw)}
}

func (s *suite) signedStripe(body []byte) answer {
	s.t.Helper()
	now := time.Now()
	sig := fmt.Sprintf("t=%d,v1=%s", now.Unix(), hex.EncodeToString(webhook.ComputeSignature(now, body, s.cfg.Secrets.StripeWebhookSecret)))
	return s.do(http.MethodPost, s.api+"/webhooks/stripe", body, map[string]string{"Stripe-Signature": sig, "Content-Type": "application/json"})
}

func (s *suite) bearer(tok string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"}
}

// registerDestination registers a payout destination for user, as a client
// must before paying out to it.
// registerDestination registers dest for user; external, when not empty,
// names the Stripe connected account's external account its payouts go to.
func (s *suite) registerDestination(user, provider, dest, external string) {
	s.t.Helper()
	body, err := json.Marshal(map[string]string{"provider": provider, "destination": dest, "external_account": external})
	require.NoError(s.t, err)
	if external == "" {
		body = []byte(fmt.Sprintf(`{"provider":%q,"destination":%q}`, provider, dest))
	}
	r := s.do(http.MethodPost, s.api+"/v1/users/"+user+"/destinations", body, s.bearer(s.token))
	require.Contains(s.t, []int{200, 201}, r.status, r.raw)
}

func (s *suite) eventually(what string, cond func() bool) {
	s.t.Helper()
	require.Eventually(s.t, cond, 60*time.Second, 50*time.Millisecond, what)
}

func (s *suite) count(query string, args ...any) int {
	s.t.Helper()
	var n int
	require.NoError(s.t, s.db.Pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

// deadLetterOfCredit stores a dead letter made from the first credit's own
// outbox record, as an operator who suspects a credit was lost would see
// one, and returns its id.
func (s *suite) deadLetterOfCredit() int64 {
	s.t.Helper()
	var l fixture.DeadLetter
	require.NoError(s.t, s.db.Pool.QueryRow(s.t.Context(), `
		SELECT topic, partition_key, event_type, convert_to(payload::text, 'UTF8'), headers, correlation_id
		FROM `+published.All+` o
		WHERE topic = 'aegis.webhook.pending' AND event_type = 'payment_intent.succeeded'
		ORDER BY id LIMIT 1`).Scan(&l.OriginalTopic, &l.PartitionKey, &l.EventType, &l.Payload, &l.Headers, &l.CorrelationID))
	l.ConsumerGroup, l.Error, l.ErrorClass = "payout-worker", "suspected lost credit", "transient"
	return l.Insert(s.t, s.db.Pool)
}

func payment(eventID, user string, amount int) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2024-06-20","created":%d,"type":"payment_intent.succeeded","data":{"object":{"id":"pi_%s","object":"payment_intent","amount":%d,"amount_received":%d,"currency":"usd","status":"succeeded","metadata":{"user_id":%q}}}}`,
		eventID, time.Now().Unix(), eventID, amount, amount, user))
}

func TestWholePath(t *testing.T) {
	t.Parallel()
	s := start(t)
	user := "alice"

	// A signed payment is committed, relayed and credited once.
	body := payment("evt_e2e_1", user, 5000)
	a := s.signedStripe(body)
	require.Equal(t, 200, a.status, a.raw)
	require.Equal(t, "accepted", a.body["status"])
	// Bad input at the edge: clear answers, nothing stored.
	require.Equal(t, 200, s.signedStripe(body).status, "a duplicate is acknowledged again")
	require.Equal(t, 401, s.do(http.MethodPost, s.api+"/webhooks/stripe", body, map[string]string{"Stripe-Signature": "t=1,v1=00"}).status)
	require.Equal(t, 400, s.signedStripe([]byte(`{"id":"evt_broken",`)).status)
	require.Equal(t, 413, s.signedStripe(append([]byte(`{"pad":"`), bytes.Repeat([]byte("x"), 1<<20)...)).status)
	require.Equal(t, 1, s.count(`SELECT count(*) FROM webhook_events`), "duplicates and bad input store nothing")

	wallet := func() float64 {
		w := s.do(http.MethodGet, s.api+"/v1/wallets/"+user, nil, s.bearer(s.token))
		if w.status != 200 {
			return -1
		}
		return w.body["balance"].(float64)
	}
	s.eventually("wallet credited", func() bool { return wallet() == 5000 })

	// A payout goes out through the PSP and is finished by its webhook; it
	// goes only to a destination registered for the user: a connected
	// account, paid by a transfer, then its payout to its bank account.
	unregistered := s.do(http.MethodPost, s.api+"/v1/payouts", []byte(`{"user_id":"alice","amount":1500,"currency":"usd","destination":"acct_alice","provider":"stripe"}`),
		map[string]string{"Authorization": "Bearer " + s.token, "Idempotency-Key": "e2e-payout-0"})
	require.Equal(t, 422, unregistered.status, unregistered.raw)
	s.registerDestination(user, "stripe", "acct_alice", "ba_alice_checking")
	s.registerDestination(user, "stripe", "acct_invalid_closed", "")
	p := s.do(http.MethodPost, s.api+"/v1/payouts", []byte(`{"user_id":"alice","amount":1500,"currency":"usd","destination":"acct_alice","provider":"stripe"}`),
		map[string]string{"Authorization": "Bearer " + s.token, "Idempotency-Key": "e2e-payout-1"})
	require.Equal(t, 202, p.status, p.raw)
	pid := p.body["payout_id"].(string)
	status := func() string {
		g := s.do(http.MethodGet, s.api+"/v1/payouts/"+pid, nil, s.bearer(s.token))
		st, _ := g.body["status"].(string)
		return st
	}
	s.eventually("payout paid", func() bool { return status() == "SUCCEEDED" })
	require.EqualValues(t, 3500, wallet())

	g := s.do(http.MethodGet, s.api+"/v1/payouts/"+pid, nil, s.bearer(s.token))
	var steps []string
	for _, h := range g.body["history"].([]any) {
		steps = append(steps, h.(map[string]any)["to"].(string))
	}
	require.Equal(t, []string{"INITIALIZED", "SENDING_TO_GATEWAY", "SENT_TO_GATEWAY", "AWAITING_RESPONSE", "SUCCEEDED"}, steps)

	// The PSP made one transfer to the connected account under the
	// payout's idempotency key, and the account paid it out once to its
	// bank account under a key of its own.
	objs := s.do(http.MethodGet, s.psp+"/_psp/objects?payout_id="+pid, nil, nil)
	items := objs.body["items"].([]any)
	require.Len(t, items, 2, objs.raw)
	byKind := map[string]map[string]any{}
	for _, it := range items {
		o := it.(map[string]any)
		byKind[o["kind"].(string)] = o
	}
	require.Equal(t, "aegis-payout-"+pid, byKind["transfer"]["idempotency_key"], objs.raw)
	require.Equal(t, "acct_alice", byKind["transfer"]["destination"], objs.raw)
	require.Equal(t, "aegis-payout-"+pid+"-payout", byKind["payout"]["idempotency_key"], objs.raw)
	require.Equal(t, "acct_alice", byKind["payout"]["account"], objs.raw)
	require.Equal(t, "ba_alice_checking", byKind["payout"]["destination"], objs.raw)
	require.Equal(t, "paid", byKind["payout"]["status"], objs.raw)

	// The ledger: every transaction balanced, the wallet equals its entries.
	require.Zero(t, s.count(`SELECT count(*) FROM (SELECT 1 FROM ledger_entries GROUP BY transaction_id, currency HAVING sum(amount) <> 0) x`))
	require.Equal(t, 3, s.count(`SELECT count(*) FROM ledger_transactions WHERE kind IN ('credit', 'payout_hold', 'payout_settle')`))
	require.Equal(t, 3500, s.count(`SELECT sum(e.amount)::int FROM ledger_entries e JOIN wallets w ON w.id = e.wallet_id WHERE w.kind = 'user' AND w.owner = $1`, user))

	// dlq-admin answers with an operator token, refuses without one.
	require.Equal(t, 401, s.do(http.MethodGet, s.dlq+"/v1/dead-letters", nil, nil).status)
	list := s.do(http.MethodGet, s.dlq+"/v1/dead-letters", nil, s.bearer(s.opToken))
	require.Equal(t, 200, list.status, list.raw)
	require.Empty(t, list.body["items"])
	stats := s.do(http.MethodGet, s.dlq+"/v1/dead-letters/stats", nil, s.bearer(s.opToken))
	require.Equal(t, 200, stats.status, stats.raw)

	// A payout to an invalid account (its transfer refused): FAILED, hold
	// released, and a dead letter that travels worker → outbox → relay →
	// Kafka → dlq-admin.
	bad := s.do(http.MethodPost, s.api+"/v1/payouts", []byte(`{"user_id":"alice","amount":700,"currency":"usd","destination":"acct_invalid_closed","provider":"stripe"}`),
		map[string]string{"Authorization": "Bearer " + s.token, "Idempotency-Key": "e2e-payout-2"})
	require.Equal(t, 202, bad.status, bad.raw)
	badID := bad.body["payout_id"].(string)
	s.eventually("invalid-account payout finalized", func() bool {
		g := s.do(http.MethodGet, s.api+"/v1/payouts/"+badID, nil, s.bearer(s.token))
		return g.body["status"] == "FINALIZED"
	})
	require.EqualValues(t, 3500, wallet(), "the hold is released")
	var letter map[string]any
	s.eventually("dead letter visible in dlq-admin", func() bool {
		l := s.do(http.MethodGet, s.dlq+"/v1/dead-letters?topic=aegis.transactions&status=open", nil, s.bearer(s.opToken))
		items, _ := l.body["items"].([]any)
		if len(items) != 1 {
			return false
		}
		letter = items[0].(map[string]any)
		return true
	})
	require.Equal(t, "permanent", letter["error_class"])
	require.Equal(t, "payout-worker", letter["consumer_group"])
	require.True(t, strings.Contains(letter["error"].(string), "account_invalid"), letter["error"])
}
