package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/hmacsig"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

const (
	benchClients = 8
	benchSecret  = "whsec_bench_local"
)

// stripeBody is a realistic payment_intent.succeeded event (~1 KiB).
func stripeBody(eventID, user string, created int64) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2024-06-20","created":%d,"data":{"object":{"id":"pi_%s","object":"payment_intent","amount":5000,"amount_capturable":0,"amount_received":5000,"capture_method":"automatic","client_secret":null,"confirmation_method":"automatic","created":%d,"currency":"usd","customer":"cus_Q1benchcustomer","description":"Wallet top-up","latest_charge":"ch_3Qbench","livemode":false,"metadata":{"user_id":%q,"order_id":"order-%s"},"payment_method":"pm_1Qbench","payment_method_types":["card"],"status":"succeeded"}},"livemode":false,"pending_webhooks":1,"request":{"id":"req_bench","idempotency_key":"%s"},"type":"payment_intent.succeeded"}`,
		eventID, created, eventID, created, user, eventID, eventID))
}

func sign(body []byte, t int64) string {
	return hmacsig.SignTimestamped([]byte(benchSecret), time.Unix(t, 0), body)
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// ingestRounds alternates the baselines and the webhook load this many
// times: the machine's speed drifts between runs (a VM), so each ingest run
// is compared with pgbench runs made right beside it, by medians.
const ingestRounds = 3

// ingestManyClients is the high concurrency ingest is measured at (where
// group commit makes the largest groups), beside benchClients.
const ingestManyClients = 64

// ingestConcurrencies are the client counts ingest is measured at: a few
// PSP connections, and many (BENCH_INGEST_MANY overrides 64 for a run on a
// Postgres short of connections; the rows say the count used).
func ingestConcurrencies() []int {
	many := ingestManyClients
	if n, err := strconv.Atoi(os.Getenv("BENCH_INGEST_MANY")); err == nil && n > benchClients {
		many = n
	}
	return []int{benchClients, many}
}

// ingestLevel collects one concurrency's runs.
type ingestLevel struct {
	clients      int
	schema, bare []float64
	rates        []float64
	lat          []time.Duration
	cpu          []float64 // webhook-api CPU seconds per webhook
}

// signedBody is a webhook body with its Stripe-Signature header.
type signedBody struct {
	body []byte
	sig  string
}

// webhookSource hands out signed Stripe webhooks with unique event ids.
// Bodies are made and signed before each timed phase, as pgbench's are (its
// client costs next to nothing): the load tool shares the two cores with
// what it measures and must not be what is measured. Each phase signs
// afresh, so no signature outlives Stripe's 5-minute tolerance; a phase
// that uses them all signs the rest as it sends.
type webhookSource struct {
	seq    atomic.Int64 // the next event's number
	first  int64        // the number of bodies[0]
	bodies []signedBody
	t      int64
}

func (s *webhookSource) sign(n int64) signedBody {
	b := stripeBody(eventID(n), fmt.Sprintf("user-%d", n%5000), s.t)
	return signedBody{b, sign(b, s.t)}
}

func eventID(n int64) string { return fmt.Sprintf("evt_bench_%d", n) }

// prepare signs n bodies for the next phase (between phases: no take runs).
func (s *webhookSource) prepare(n int) {
	s.t = time.Now().Unix()
	s.first = s.seq.Load()
	s.bodies = s.bodies[:0]
	for i := range n {
		s.bodies = append(s.bodies, s.sign(s.first+int64(i)))
	}
}

// take returns the next body and its event id.
func (s *webhookSource) take() (signedBody, string) {
	n := s.seq.Add(1) - 1
	if i := n - s.first; i < int64(len(s.bodies)) {
		return s.bodies[i], eventID(n)
	}
	return s.sign(n), eventID(n)
}

// ingestTarget is the webhook-api process under test and how to load it.
type ingestTarget struct {
	base   string
	client *http.Client
	src    *webhookSource
}

// post sends one webhook and returns its status and event id.
func (t *ingestTarget) post(ctx context.Context, c *http.Client) (int, http.Header, string, error) {
	b, id := t.src.take()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, t.base+"/webhooks/stripe", bytes.NewReader(b.body))
	req.Header.Set("Stripe-Signature", b.sig)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, id, err
	}
	// Read to EOF so the connection is reused, as a PSP's keep-alive
	// client would; an unread body makes every request a new connection.
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header, id, nil
}

// measure drives the target with clients closed-loop clients for d and
// returns webhooks acknowledged per second and their latencies.
func (t *ingestTarget) measure(ctx context.Context, clients int, d time.Duration) (float64, []time.Duration, error) {
	var wg sync.WaitGroup
	lat := make([][]time.Duration, clients)
	errs := make([]error, clients)
	start := time.Now()
	end := start.Add(d)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				now := time.Now()
				status, _, _, err := t.post(ctx, t.client)
				if err == nil && status != http.StatusOK {
					err = fmt.Errorf("webhook answered %d", status)
				}
				if err != nil {
					errs[c] = err
					return
				}
				lat[c] = append(lat[c], time.Since(now))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for c := range clients {
		if errs[c] != nil {
			return 0, nil, errs[c]
		}
		all = append(all, lat[c]...)
	}
	return float64(len(all)) / elapsed.Seconds(), all, nil
}

// ingest drives webhook-api, at its default settings, with signed Stripe
// webhooks from 8 and from 64 clients, each run beside the two pgbench
// baselines at the same concurrency; then offers it three times what it
// sustained (overload.go).
func (r *Runner) ingest(ctx context.Context) error {
	r.progress("ingest: signed Stripe webhooks, %v clients, %s per phase", ingestConcurrencies(), r.cfg.Duration)
	url, pool, err := r.freshDB(ctx, "aegis_bench_ingest")
	if err != nil {
		return err
	}
	defer pool.Close()
	s := r.newStack()
	defer func() { _ = s.Stop(20 * time.Second) }() // a bench run reports its figures, not the teardown
	port, err := proctest.Port()
	if err != nil {
		return err
	}
	env := map[string]string{
		"DATABASE_URL": url, "HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port), "STRIPE_WEBHOOK_SECRET": benchSecret,
		"API_TOKENS": "bench:bench-token-0123456789", "LOG_LEVEL": "info", eventproof.EnvKey: stack.DevEventSigningKey,
	}
	// Experiments only (the rows are the defaults): make bench GOMAXPROCS=1 ...
	for _, k := range []string{"INGEST_COMMIT_WORKERS", "INGEST_COMMIT_GROUP", "DB_MAX_CONNS", "GOGC", "GOMAXPROCS", "LOG_LEVEL", "PPROF_ADDR"} {
		if v := os.Getenv(k); v != "" {
			env[k] = v
		}
	}
	if err := s.Launch("webhook-api", "webhook-api", env); err != nil {
		return err
	}
	maxClients := ingestConcurrencies()[1]
	t := &ingestTarget{base: stack.URL(port), src: &webhookSource{},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: maxClients, MaxConnsPerHost: maxClients}}}
	if err := s.WaitHTTP(ctx, t.base+"/readyz"); err != nil {
		return err
	}
	phaseBodies := int(r.cfg.Duration.Seconds()*10_000) + 1000
	t.src.prepare(20_000)
	if _, _, err := t.measure(ctx, benchClients, 2*time.Second); err != nil { // warm up
		return fmt.Errorf("warm-up: %w", err)
	}

	schema, cleanup, err := r.newPgbench(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	bare, cleanupBare, err := r.newBarePgbench(ctx)
	if err != nil {
		return err
	}
	defer cleanupBare()
	levels := make([]*ingestLevel, len(ingestConcurrencies()))
	for i, c := range ingestConcurrencies() {
		levels[i] = &ingestLevel{clients: c}
	}
	acked := 0
	for round := 1; round <= ingestRounds; round++ {
		for _, l := range levels {
			r.progress("ingest: round %d/%d, %d clients: schema pgbench, bare pgbench, webhooks", round, ingestRounds, l.clients)
			tps, err := schema.runClients(ctx, r.cfg.Duration, l.clients)
			if err != nil {
				return err
			}
			bareTPS, err := bare.runClients(ctx, r.cfg.Duration, l.clients)
			if err != nil {
				return err
			}
			t.src.prepare(phaseBodies)
			cpu0, err := t.cpuSeconds(ctx)
			if err != nil {
				return err
			}
			rate, lat, err := t.measure(ctx, l.clients, r.cfg.Duration)
			if err != nil {
				return fmt.Errorf("%d clients: %w", l.clients, err)
			}
			cpu1, err := t.cpuSeconds(ctx)
			if err != nil {
				return err
			}
			l.cpu = append(l.cpu, (cpu1-cpu0)/float64(len(lat)))
			l.schema, l.bare = append(l.schema, tps), append(l.bare, bareTPS)
			l.rates, l.lat = append(l.rates, rate), append(l.lat, lat...)
			acked += len(lat)
		}
	}
	var stored int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM transaction_outbox").Scan(&stored); err != nil {
		return err
	}
	if stored < acked {
		return fmt.Errorf("%d webhooks acknowledged but only %d outbox rows committed", acked, stored)
	}
	for _, l := range levels {
		schemaMed, bareMed := median(l.schema), median(l.bare)
		r.add(Row{"pgbench baseline", fmt.Sprintf("webhook_events + transaction_outbox insert per tx on the schema, %d clients (median of %d runs beside ingest)", l.clients, ingestRounds),
			fmt.Sprintf("%.0f tx/s (runs: %s)", schemaMed, joinRates(l.schema)), "—", ""})
		r.add(Row{"pgbench baseline", fmt.Sprintf("the same inserts into two bare tables (primary keys only), %d clients (median of %d runs)", l.clients, ingestRounds),
			fmt.Sprintf("%.0f tx/s (runs: %s); the schema's constraints and indexes cost %.0f%%", bareMed, joinRates(l.bare), 100*(1-schemaMed/bareMed)), "—", ""})
		rateMed := median(l.rates)
		sortDurations(l.lat)
		p99 := percentile(l.lat, 0.99)
		r.add(Row{"ingest", fmt.Sprintf("signed Stripe webhooks/s, %d clients, each answered after its commit, default settings (median of %d runs)", l.clients, ingestRounds),
			fmt.Sprintf("%.0f /s = %.2f× schema pgbench (runs: %s)", rateMed, rateMed/schemaMed, ratios(l.rates, l.schema)), "≥ 1.0× schema pgbench", verdict(rateMed/schemaMed >= 1.0)})
		r.add(Row{"ingest", fmt.Sprintf("the same against the bare pgbench, %d clients", l.clients),
			fmt.Sprintf("%.2f× bare pgbench (runs: %s)", rateMed/bareMed, ratios(l.rates, l.bare)), "≥ 0.8× bare pgbench", verdict(rateMed/bareMed >= 0.8)})
		r.add(Row{"ingest", fmt.Sprintf("webhook latency p50 / p99, %d clients", l.clients), ms(percentile(l.lat, 0.5)) + " / " + ms(p99), "p99 ≤ 25 ms", verdict(p99 <= 25*time.Millisecond)})
		r.add(Row{"ingest", fmt.Sprintf("webhook-api CPU per webhook (user + system), %d clients", l.clients),
			fmt.Sprintf("%.0f µs (runs: %s)", 1e6*median(l.cpu), joinMicros(l.cpu)), "—", ""})
	}
	sustained := median(levels[len(levels)-1].rates)
	return r.overload(ctx, t, pool, sustained, median(levels[0].rates))
}

// cpuSeconds is the CPU time webhook-api has used, from its
// process_cpu_seconds_total.
func (t *ingestTarget) cpuSeconds(ctx context.Context) (float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, t.base+"/metrics", nil)
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "process_cpu_seconds_total "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no process_cpu_seconds_total in webhook-api's /metrics")
}

// ratios lists each run's rate over its baseline run.
func ratios(rates, base []float64) string {
	parts := make([]string, len(rates))
	for i := range rates {
		parts[i] = strconv.FormatFloat(rates[i]/base[i], 'f', 2, 64)
	}
	return strings.Join(parts, ", ")
}

func joinMicros(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(1e6*x, 'f', 0, 64)
	}
	return strings.Join(parts, ", ")
}

func joinRates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(parts, ", ")
}
