package bench

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// pgbench runs the same two inserts as a webhook (inbox row and outbox row,
// one transaction) with 8 clients: the ceiling ingest is measured against.
func (r *Runner) pgbench(ctx context.Context) error {
	r.progress("pgbench baseline: 2 inserts per transaction, %d clients, %s", benchClients, r.cfg.Duration)
	url, pool, err := r.freshDB(ctx, "aegis_bench_pgbench")
	if err != nil {
		return err
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
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ingest.sql")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "pgbench", "-n", "-c", strconv.Itoa(benchClients), "-j", "2",
		"-T", strconv.Itoa(int(r.cfg.Duration.Seconds())), "-f", path, url).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgbench: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`).FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("pgbench output without tps:\n%s", out)
	}
	r.pgbenchTPS, _ = strconv.ParseFloat(string(m[1]), 64)
	lat := regexp.MustCompile(`latency average = ([0-9.]+) ms`).FindSubmatch(out)
	avg := ""
	if lat != nil {
		avg = fmt.Sprintf(", avg %s ms", lat[1])
	}
	r.add(Row{"pgbench baseline", fmt.Sprintf("webhook_events + transaction_outbox insert per tx, %d clients", benchClients),
		fmt.Sprintf("%.0f tx/s%s", r.pgbenchTPS, avg), "—", ""})
	return nil
}

// ingest drives webhook-api with signed Stripe webhooks from 8 clients.
func (r *Runner) ingest(ctx context.Context) error {
	r.progress("ingest: signed Stripe webhooks, %d clients, %s", benchClients, r.cfg.Duration)
	url, pool, err := r.freshDB(ctx, "aegis_bench_ingest")
	if err != nil {
		return err
	}
	defer pool.Close()
	port, err := freePort()
	if err != nil {
		return err
	}
	s := r.newStack()
	defer s.Stop(20 * time.Second)
	if err := s.Launch("webhook-api", "webhook-api", map[string]string{
		"DATABASE_URL": url, "HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port), "STRIPE_WEBHOOK_SECRET": benchSecret,
		"API_TOKENS": "bench:bench-token-0123456789", "LOG_LEVEL": "info",
	}); err != nil {
		return err
	}
	base := stack.URL(port)
	if err := s.WaitHTTP(ctx, base+"/readyz"); err != nil {
		return err
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchClients, MaxConnsPerHost: benchClients}}
	var seq atomic.Int64
	send := func() (time.Duration, error) {
		n := seq.Add(1)
		now := time.Now()
		body := stripeBody(fmt.Sprintf("evt_bench_%d", n), fmt.Sprintf("user-%d", n%5000), now.Unix())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/webhooks/stripe", bytes.NewReader(body))
		req.Header.Set("Stripe-Signature", sign(body, now.Unix()))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("webhook answered %d", resp.StatusCode)
		}
		return time.Since(now), nil
	}
	// Warm up, then measure.
	warm := time.Now().Add(2 * time.Second)
	for time.Now().Before(warm) {
		if _, err := send(); err != nil {
			return err
		}
	}
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
				d, err := send()
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
			return errs[c]
		}
		all = append(all, lat[c]...)
	}
	sortDurations(all)
	rate := float64(len(all)) / elapsed.Seconds()
	ratio := rate / r.pgbenchTPS
	var stored int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM transaction_outbox").Scan(&stored); err != nil {
		return err
	}
	if stored < len(all) {
		return fmt.Errorf("%d webhooks acknowledged but only %d outbox rows committed", len(all), stored)
	}
	r.add(Row{"ingest", fmt.Sprintf("signed Stripe webhooks/s, %d clients (each answered after its commit)", benchClients),
		fmt.Sprintf("%.0f /s = %.2f× pgbench", rate, ratio), "≥ 0.8× pgbench", verdict(ratio >= 0.8)})
	p99 := percentile(all, 0.99)
	r.add(Row{"ingest", "webhook latency p50 / p99", ms(percentile(all, 0.5)) + " / " + ms(p99), "p99 < 25 ms", verdict(p99 < 25*time.Millisecond)})
	return nil
}
