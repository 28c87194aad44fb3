package bench

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	mac := hmac.New(sha256.New, []byte(benchSecret))
	fmt.Fprintf(mac, "%d.", t)
	mac.Write(body)
	return fmt.Sprintf("t=%d,v1=%s", t, hex.EncodeToString(mac.Sum(nil)))
}

// pgbenchRunner prepares the baseline: the same two inserts as a webhook
// (inbox row and outbox row, one transaction) on a database of the same
// schema, run by pgbench with 8 clients.
type pgbenchRunner struct {
	url, script string
}

func (r *Runner) newPgbench(ctx context.Context) (*pgbenchRunner, func(), error) {
	url, pool, err := r.freshDB(ctx, "aegis_bench_pgbench")
	if err != nil {
		return nil, nil, err
	}
	pool.Close()
	body := stripeBody("evt_pgbench", "user-1", time.Now().Unix())
	envelope := fmt.Sprintf(`{"provider":"stripe","event_id":"evt_x","type":"payment_intent.succeeded","action":"credit","user_id":"user-1","amount":5000,"currency":"usd","reference":"pi_x","occurred_at":"2026-11-21T00:00:00Z","raw":%s}`, body)
	script := fmt.Sprintf(`\set n random(1, 1000000000000)
BEGIN;
INSERT INTO webhook_events (provider, event_id, event_type, object_id, user_id, amount, currency, occurred_at, payload, correlation_id)
VALUES ('stripe', 'evt_' || :client_id || '_' || :n, 'payment_intent.succeeded', 'pi_x', 'user-1', 5000, 'usd', now(), '%s', 'corr') ON CONFLICT DO NOTHING;
INSERT INTO transaction_outbox (topic, event_type, partition_key, payload, headers, correlation_id)
VALUES ('aegis.webhook.pending', 'payment_intent.succeeded', 'user-' || :n, '%s', '{"correlation_id":"corr"}', 'corr');
END;
`, body, envelope)
	dir, err := os.MkdirTemp("", "aegis-bench")
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(dir, "ingest.sql")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		return nil, nil, err
	}
	return &pgbenchRunner{url: url, script: path}, func() { os.RemoveAll(dir) }, nil
}

// run runs pgbench for d and returns its transactions per second.
func (p *pgbenchRunner) run(ctx context.Context, d time.Duration) (float64, error) {
	out, err := exec.CommandContext(ctx, "pgbench", "-n", "-c", strconv.Itoa(benchClients), "-j", "2",
		"-T", strconv.Itoa(int(d.Seconds())), "-f", p.script, p.url).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("pgbench output without tps:\n%s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// pgbench alone: the baseline row.
func (r *Runner) pgbench(ctx context.Context) error {
	r.progress("pgbench baseline: 2 inserts per transaction, %d clients, %s", benchClients, r.cfg.Duration)
	p, cleanup, err := r.newPgbench(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	tps, err := p.run(ctx, r.cfg.Duration)
	if err != nil {
		return err
	}
	r.add(Row{"pgbench baseline", fmt.Sprintf("webhook_events + transaction_outbox insert per tx, %d clients", benchClients),
		fmt.Sprintf("%.0f tx/s", tps), "—", ""})
	return nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// ingestRounds alternates pgbench and the webhook load this many times:
// the machine's speed drifts between runs (a VM), so each ingest run is
// compared with a pgbench run made right beside it, by medians.
const ingestRounds = 3

// ingestTarget is one webhook-api process under test.
type ingestTarget struct {
	name, label string
	gomaxprocs  string // "" leaves the Go default (one per core)
	base        string
	rates       []float64
	lat         []time.Duration
}

// ingest drives webhook-api with signed Stripe webhooks from 8 clients, in
// two configurations measured side by side: GOMAXPROCS=1, the setting we
// recommend when the service shares a small host with Postgres (README,
// "Tuning"), and Go's default of one thread per core.
func (r *Runner) ingest(ctx context.Context) error {
	r.progress("ingest: signed Stripe webhooks, %d clients, %s", benchClients, r.cfg.Duration)
	url, pool, err := r.freshDB(ctx, "aegis_bench_ingest")
	if err != nil {
		return err
	}
	defer pool.Close()
	s := r.newStack()
	defer s.Stop(20 * time.Second)
	targets := []*ingestTarget{
		{name: "webhook-api", label: "webhook-api GOMAXPROCS=1", gomaxprocs: "1"},
		{name: "webhook-api-default", label: "webhook-api GOMAXPROCS default"},
	}
	for _, t := range targets {
		port, err := freePort()
		if err != nil {
			return err
		}
		env := map[string]string{
			"DATABASE_URL": url, "HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port), "STRIPE_WEBHOOK_SECRET": benchSecret,
			"API_TOKENS": "bench:bench-token-0123456789", "LOG_LEVEL": "info",
		}
		if t.gomaxprocs != "" {
			env["GOMAXPROCS"] = t.gomaxprocs
		}
		for _, k := range []string{"INGEST_COMMIT_WORKERS", "INGEST_COMMIT_GROUP", "DB_MAX_CONNS", "GOGC", "LOG_LEVEL", "PPROF_ADDR"} {
			if v := os.Getenv(k); v != "" {
				env[k] = v // experiments: make bench INGEST_COMMIT_WORKERS=...
			}
		}
		if t.gomaxprocs == "" {
			delete(env, "PPROF_ADDR") // the port can serve only one of them
		}
		if err := s.Launch(t.name, "webhook-api", env); err != nil {
			return err
		}
		t.base = stack.URL(port)
		if err := s.WaitHTTP(ctx, t.base+"/readyz"); err != nil {
			return err
		}
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchClients, MaxConnsPerHost: benchClients}}
	// Bodies are made and signed before the clock starts, as pgbench's are
	// (its client costs next to nothing): the load tool shares the two cores
	// with what it measures and must not be what is measured. Should a fast
	// machine use them all, the rest are signed as they are sent.
	budget := (int(r.cfg.Duration.Seconds())*ingestRounds*len(targets) + 4) * 6_000
	r.progress("ingest: signing %d webhook bodies ahead of the run", budget)
	created := time.Now().Unix()
	type signed struct {
		body []byte
		sig  string
	}
	signBody := func(n int64) signed {
		b := stripeBody(fmt.Sprintf("evt_bench_%d", n), fmt.Sprintf("user-%d", n%5000), created)
		return signed{b, sign(b, created)}
	}
	bodies := make([]signed, budget)
	for i := range bodies {
		bodies[i] = signBody(int64(i))
	}
	var seq atomic.Int64
	send := func(base string) (time.Duration, error) {
		n := seq.Add(1) - 1
		var b signed
		if n < int64(len(bodies)) {
			b = bodies[n]
		} else {
			b = signBody(n)
		}
		now := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/webhooks/stripe", bytes.NewReader(b.body))
		req.Header.Set("Stripe-Signature", b.sig)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		// Read to EOF so the connection is reused, as a PSP's keep-alive
		// client would; an unread body makes every request a new connection.
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("webhook answered %d", resp.StatusCode)
		}
		return time.Since(now), nil
	}
	measure := func(base string) (float64, []time.Duration, error) {
		var wg sync.WaitGroup
		lat := make([][]time.Duration, benchClients)
		errs := make([]error, benchClients)
		start := time.Now()
		end := start.Add(r.cfg.Duration)
		for c := range benchClients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					d, err := send(base)
					if err != nil {
						errs[c] = err
						return
					}
					lat[c] = append(lat[c], d)
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		var all []time.Duration
		for c := range benchClients {
			if errs[c] != nil {
				return 0, nil, errs[c]
			}
			all = append(all, lat[c]...)
		}
		return float64(len(all)) / elapsed.Seconds(), all, nil
	}
	// Warm up each process, then measure.
	for _, t := range targets {
		warm := time.Now().Add(2 * time.Second)
		for time.Now().Before(warm) {
			if _, err := send(t.base); err != nil {
				return err
			}
		}
	}

	pg, cleanup, err := r.newPgbench(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	var tpss []float64
	acked := 0
	for round := 1; round <= ingestRounds; round++ {
		r.progress("ingest: round %d/%d: pgbench, then webhooks to each configuration", round, ingestRounds)
		tps, err := pg.run(ctx, r.cfg.Duration)
		if err != nil {
			return err
		}
		tpss = append(tpss, tps)
		for _, t := range targets {
			rate, lat, err := measure(t.base)
			if err != nil {
				return fmt.Errorf("%s: %w", t.label, err)
			}
			t.rates, t.lat = append(t.rates, rate), append(t.lat, lat...)
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
	pgMed := median(tpss)
	r.add(Row{"pgbench baseline", fmt.Sprintf("webhook_events + transaction_outbox insert per tx, %d clients (median of %d runs beside ingest)", benchClients, ingestRounds),
		fmt.Sprintf("%.0f tx/s (runs: %s)", pgMed, joinRates(tpss)), "—", ""})
	for _, t := range targets {
		rateMed := median(t.rates)
		ratio := rateMed / pgMed
		sortDurations(t.lat)
		p99 := percentile(t.lat, 0.99)
		r.add(Row{"ingest", fmt.Sprintf("signed Stripe webhooks/s, %d clients, each answered after its commit, %s (median of %d runs)", benchClients, t.label, ingestRounds),
			fmt.Sprintf("%.0f /s = %.2f× pgbench (runs: %s)", rateMed, ratio, joinRates(t.rates)), "≥ 0.8× pgbench", verdict(ratio >= 0.8)})
		r.add(Row{"ingest", fmt.Sprintf("webhook latency p50 / p99, %s", t.label), ms(percentile(t.lat, 0.5)) + " / " + ms(p99), "p99 < 25 ms", verdict(p99 < 25*time.Millisecond)})
	}
	return nil
}

func joinRates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(parts, ", ")
}
