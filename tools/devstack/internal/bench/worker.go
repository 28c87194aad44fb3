package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

const (
	benchCredits = 50_000
	benchPayouts = 10_000
	benchUsers   = 5_000
)

// worker measures wallet credits and payouts per second from Kafka through
// the payout worker (ledger, Redis wallet locks, PSP stand-in).
func (r *Runner) worker(ctx context.Context) error {
	url, pool, err := r.freshDB(ctx, "aegis_bench_worker")
	if err != nil {
		return err
	}
	defer pool.Close()
	var ports [3]int
	for i := range ports {
		if ports[i], err = proctest.Port(); err != nil {
			return err
		}
	}
	kport, pspPort, wport := ports[0], ports[1], ports[2]
	s := r.newStack()
	defer func() { _ = s.Stop(30 * time.Second) }() // a bench run reports its figures, not the teardown
	if err := s.Launch("kafka", "aegis-kafka", map[string]string{"KAFKA_PORT": strconv.Itoa(kport), "KAFKA_PARTITIONS": strconv.Itoa(partitions)}); err != nil {
		return err
	}
	if err := s.Launch("psp", "aegis-psp", map[string]string{"PSP_ADDR": fmt.Sprintf("127.0.0.1:%d", pspPort), "PSP_SETTLE_DELAY": "0"}); err != nil {
		return err
	}
	if err := s.WaitHTTP(ctx, stack.URL(pspPort)+"/healthz"); err != nil {
		return err
	}
	brokers := fmt.Sprintf("127.0.0.1:%d", kport)
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(1_000_000))
	if err != nil {
		return err
	}
	defer producer.Close()

	// The credit ceiling: pgbench of the worker's credit batch at two
	// concurrencies now, and at the better one again after the worker's
	// credits (the machine's speed drifts); the best run counts.
	cb, err := r.newCreditBench(ctx)
	if err != nil {
		return err
	}
	bestClients, bestTPS := 0, 0.0
	for _, c := range creditClients {
		tps, err := cb.run(ctx, r, c)
		if err != nil {
			return err
		}
		if tps > bestTPS {
			bestClients, bestTPS = c, tps
		}
	}

	r.progress("worker: producing %d credit events for %d wallets", benchCredits, benchUsers)
	// Signed as webhook-api signs them: the worker credits nothing else.
	keys, err := eventproof.New(stack.DevEventSigningKey, "")
	if err != nil {
		return err
	}
	for i := range benchCredits {
		user := fmt.Sprintf("user-%d", i%benchUsers)
		e := event.PSPEvent{Provider: "stripe", EventID: fmt.Sprintf("evt_c_%d", i), Type: "payment_intent.succeeded",
			Action: event.ActionCredit, UserID: user, Amount: 1000, Currency: "usd", Reference: fmt.Sprintf("pi_c_%d", i),
			OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}
		b, _ := json.Marshal(e)
		producer.Produce(ctx, &kgo.Record{Topic: kafkax.TopicWebhookPending, Key: []byte(user), Value: b,
			Headers: []kgo.RecordHeader{{Key: kafkax.HeaderMessageID, Value: []byte(e.MessageID())},
				{Key: eventproof.Header, Value: []byte(keys.Sign(e))}}}, nil)
	}
	if err := producer.Flush(ctx); err != nil {
		return err
	}

	r.progress("worker: consuming the credits with one payout-worker process")
	env := map[string]string{
		"DATABASE_URL": url, "KAFKA_BROKERS": brokers, "REDIS_URL": r.cfg.RedisURL, "LOG_LEVEL": "warn",
		"HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", wport), "STRIPE_SECRET_KEY": "sk_test_bench", "STRIPE_API_BASE": stack.URL(pspPort),
		"CONSUMER_GROUP": "payout-worker-bench", eventproof.EnvKey: stack.DevEventSigningKey,
	}
	for _, k := range []string{"WORKER_CONCURRENCY", "WORKER_MAX_POLL_RECORDS", "DB_MAX_CONNS", "GOMAXPROCS", "PPROF_ADDR"} {
		if v := os.Getenv(k); v != "" {
			env[k] = v // experiments and profiles: make bench SCENARIOS=worker PPROF_ADDR=127.0.0.1:6061
		}
	}
	start := time.Now()
	if err := s.Launch("payout-worker", "payout-worker", env); err != nil {
		return err
	}
	if err := waitCount(ctx, pool, `SELECT count(*) FROM ledger_transactions WHERE kind = 'credit'`, benchCredits, 5*time.Minute); err != nil {
		return err
	}
	took := time.Since(start)
	credits := float64(benchCredits) / took.Seconds()
	r.add(Row{"worker", fmt.Sprintf("wallet credits from Kafka to the ledger (%dk events, %dk wallets, one worker)", benchCredits/1000, benchUsers/1000),
		fmt.Sprintf("%.0f credits/s = %.0f ledger tx/s", credits, credits), "≥ 2,000 /s", verdict(credits >= 2000)})
	// The steady rate, from the first credit's commit to the last: the
	// figure above also holds the worker's start and group join.
	var span float64
	if err := pool.QueryRow(ctx, `SELECT extract(epoch FROM max(created_at) - min(created_at))::float8 FROM ledger_transactions WHERE kind = 'credit'`).Scan(&span); err != nil {
		return err
	}
	steady := float64(benchCredits-1) / max(span, 1e-3)
	if _, err := cb.run(ctx, r, bestClients); err != nil {
		return err
	}
	ratio := steady / cb.best()
	r.add(Row{"worker", fmt.Sprintf("wallet credits, steady rate (first to last credit's commit) vs pgbench of the same credit batch (%v clients before, %d after; best run)", creditClients, bestClients),
		fmt.Sprintf("%.0f /s = %.2f× pgbench (runs: %s tx/s)", steady, ratio, joinRates(cb.runs)), "≥ 0.8× pgbench", verdict(ratio >= 0.8)})

	// Each to a connected account's bank account, as every Stripe payout
	// goes: a transfer, then the account's payout, which the stand-in
	// leaves pending (PSP_SETTLE_DELAY 0).
	r.progress("worker: %d payouts through the PSP stand-in", benchPayouts)
	if _, err := pool.Exec(ctx, `
		INSERT INTO payouts (id, client_id, idempotency_key, request_hash, user_id, amount, currency, destination,
		                     external_account, provider)
		SELECT gen_random_uuid(), 'bench', 'k-' || i, 'h', 'user-' || (i % $2), 100, 'usd', 'acct_bench', 'ba_bench', 'stripe'
		FROM generate_series(1, $1) i`, benchPayouts, benchUsers); err != nil {
		return err
	}
	rows, err := pool.Query(ctx, `SELECT id::text, user_id FROM payouts`)
	if err != nil {
		return err
	}
	type p struct{ id, user string }
	var all []p
	for rows.Next() {
		var x p
		if err := rows.Scan(&x.id, &x.user); err != nil {
			return err
		}
		all = append(all, x)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	start = time.Now()
	for _, x := range all {
		b, _ := json.Marshal(event.PayoutRequested{PayoutID: x.id, UserID: x.user, Amount: 100, Currency: "usd", Provider: "stripe"})
		producer.Produce(ctx, &kgo.Record{Topic: kafkax.TopicTransactions, Key: []byte(x.user), Value: b,
			Headers: []kgo.RecordHeader{{Key: kafkax.HeaderMessageID, Value: []byte("payout:" + x.id + ":request")}}}, nil)
	}
	if err := producer.Flush(ctx); err != nil {
		return err
	}
	if err := waitCount(ctx, pool, `SELECT count(*) FROM payouts WHERE status = 'AWAITING_RESPONSE'`, benchPayouts, 5*time.Minute); err != nil {
		return err
	}
	took = time.Since(start)
	payouts := float64(benchPayouts) / took.Seconds()
	r.add(Row{"worker", fmt.Sprintf("payouts from Kafka through wallet lock, hold and PSP calls (transfer, connected payout) to AWAITING_RESPONSE (%dk)", benchPayouts/1000),
		fmt.Sprintf("%.0f payouts/s", payouts), "≥ 500 /s", verdict(payouts >= 500)})
	r.add(Row{"worker", "during payouts: Redis wallet-lock acquisitions / ledger tx", fmt.Sprintf("%.0f /s / %.0f /s", payouts, payouts), "—", ""})
	return nil
}

// creditClients are the pgbench concurrencies of the credit baseline: 8,
// and the worker's default connection pool (DB_MAX_CONNS 24), which is how
// many credit batches it can have in flight.
var creditClients = []int{8, 24}

// creditBench runs pgbench with the worker's own credit batch (see
// creditScript) on a fresh database: the ceiling for worker credits.
type creditBench struct {
	url, script string
	runs        []float64
}

func (r *Runner) newCreditBench(ctx context.Context) (*creditBench, error) {
	repo, err := repoRoot()
	if err != nil {
		return nil, err
	}
	url, pool, err := r.freshDB(ctx, "aegis_bench_credit_pgbench")
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	var clearing int64
	if err := pool.QueryRow(ctx, `INSERT INTO wallets (kind, owner, currency) VALUES ('system', 'psp_clearing:stripe', 'usd') RETURNING id`).Scan(&clearing); err != nil {
		return nil, fmt.Errorf("create clearing account: %w", err)
	}
	script, err := creditScript(repo, clearing)
	if err != nil {
		return nil, err
	}
	return &creditBench{url: url, script: script}, nil
}

// run runs it with clients for the load phase's duration and records the
// rate.
func (c *creditBench) run(ctx context.Context, r *Runner, clients int) (float64, error) {
	r.progress("worker: pgbench of the credit batch, %d clients, %s", clients, r.cfg.Duration)
	tps, err := runPgbench(ctx, c.url, c.script, clients, r.cfg.Duration, "-M", "prepared")
	if err != nil {
		return 0, fmt.Errorf("credit baseline: %w", err)
	}
	r.progress("worker: pgbench of the credit batch, %d clients: %.0f tx/s", clients, tps)
	c.runs = append(c.runs, tps)
	return tps, nil
}

// best is the highest rate of its runs.
func (c *creditBench) best() float64 {
	b := 0.0
	for _, x := range c.runs {
		b = max(b, x)
	}
	return b
}

func waitCount(ctx context.Context, pool *pgxpool.Pool, query string, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var n int
		if err := pool.QueryRow(ctx, query).Scan(&n); err != nil {
			return err
		}
		if n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d after %s (%s)", n, want, timeout, query)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
