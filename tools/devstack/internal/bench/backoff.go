package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/tools/devstack/internal/published"
	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

const (
	// backoffUsers wallets: the even ones get a payout waiting for its
	// retry, the odd ones are the reference.
	backoffUsers = 200
	// backoffRate credits per second during the measured phase, round
	// robin over the wallets.
	backoffRate = 100
	// backoffRetryAfter is the PSP's Retry-After for the waiting payouts:
	// far longer than the phase and the wait after it.
	backoffRetryAfter = 600
	// backoffGrace is how long after the phase a credit may still arrive
	// before it counts as held back.
	backoffGrace = time.Minute
)

// backoff measures what a payout waiting for its scheduled retry costs its
// user's other money (outbox, relay, Kafka, worker, ledger): one payout of
// every other wallet is answered 429 with a Retry-After of ten minutes, then
// credits arrive for every wallet through the outbox, as webhook-api writes
// them; the credits' p99 (outbox commit to ledger commit) of the wallets
// with a payout in backoff is compared with the others'. A retry written on
// its user's key holds every later row of that key until it is due: those
// credits would wait the whole Retry-After.
func (r *Runner) backoff(ctx context.Context) error {
	url, pool, err := r.freshDB(ctx, "aegis_bench_backoff")
	if err != nil {
		return err
	}
	defer pool.Close()
	// The latencies are read from the outbox rows, which the relay deletes
	// as it publishes them: keep a copy (it costs both groups alike).
	if err := published.Keep(ctx, pool); err != nil {
		return err
	}
	var ports [4]int
	for i := range ports {
		if ports[i], err = proctest.Port(); err != nil {
			return err
		}
	}
	kport, pspPort, rport, wport := ports[0], ports[1], ports[2], ports[3]
	s := r.newStack()
	defer func() { _ = s.Stop(30 * time.Second) }() // a bench run reports its figures, not the teardown
	if err := s.Launch("kafka", "aegis-kafka", map[string]string{"KAFKA_PORT": strconv.Itoa(kport), "KAFKA_PARTITIONS": strconv.Itoa(partitions)}); err != nil {
		return err
	}
	pspURL := stack.URL(pspPort)
	if err := s.Launch("psp", "aegis-psp", map[string]string{"PSP_ADDR": fmt.Sprintf("127.0.0.1:%d", pspPort), "PSP_SETTLE_DELAY": "0"}); err != nil {
		return err
	}
	if err := s.WaitHTTP(ctx, pspURL+"/healthz"); err != nil {
		return err
	}
	brokers := fmt.Sprintf("127.0.0.1:%d", kport)
	if err := s.Launch("outbox-relay", "outbox-relay", map[string]string{
		"DATABASE_URL": url, "KAFKA_BROKERS": brokers, "HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", rport), "LOG_LEVEL": "warn",
	}); err != nil {
		return err
	}
	if err := s.Launch("payout-worker", "payout-worker", map[string]string{
		"DATABASE_URL": url, "KAFKA_BROKERS": brokers, "REDIS_URL": r.cfg.RedisURL, "LOG_LEVEL": "warn",
		"HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", wport), "STRIPE_SECRET_KEY": "sk_test_bench", "STRIPE_API_BASE": pspURL,
		"CONSUMER_GROUP": "payout-worker-bench-backoff", eventproof.EnvKey: stack.DevEventSigningKey,
		// The 429s must defer the payouts by the PSP's Retry-After, not
		// open the breaker (whose shorter defer would end the backoff
		// during the phase).
		"BREAKER_FAILURES": strconv.Itoa(10 * backoffUsers),
	}); err != nil {
		return err
	}

	keys, err := eventproof.New(stack.DevEventSigningKey, "")
	if err != nil {
		return err
	}
	r.progress("backoff: funding %d wallets through the outbox", backoffUsers)
	for u := range backoffUsers {
		if err := backoffCredit(ctx, pool, keys, u, "pi_seed_"+strconv.Itoa(u), 10_000); err != nil {
			return err
		}
	}
	if err := waitCount(ctx, pool, `SELECT count(*) FROM ledger_transactions WHERE kind = 'credit'`, backoffUsers, 2*time.Minute); err != nil {
		return err
	}

	waiting := backoffUsers / 2
	r.progress("backoff: one payout of %d wallets answered 429, Retry-After %ds", waiting, backoffRetryAfter)
	if err := pspFaults(ctx, http.MethodPut, pspURL, fmt.Sprintf(`{"provider":"stripe","retry_after_seconds":%d,"next":[{"kind":"429","count":%d}]}`,
		backoffRetryAfter, waiting)); err != nil {
		return err
	}
	for u := 0; u < backoffUsers; u += 2 {
		if err := backoffPayout(ctx, pool, u); err != nil {
			return err
		}
	}
	if err := waitCount(ctx, pool, `SELECT count(*) FROM payouts WHERE status = 'RETRYING'`, waiting, 2*time.Minute); err != nil {
		return err
	}
	if err := pspFaults(ctx, http.MethodDelete, pspURL, ""); err != nil {
		return err
	}

	r.progress("backoff: %d credits/s over %d wallets for %s", backoffRate, backoffUsers, r.cfg.Duration)
	start := time.Now()
	n := 0
	for ; ; n++ {
		due := start.Add(time.Duration(n) * time.Second / backoffRate)
		if due.Sub(start) >= r.cfg.Duration {
			break
		}
		if d := time.Until(due); d > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			}
		}
		if err := backoffCredit(ctx, pool, keys, n%backoffUsers, "pi_b_"+strconv.Itoa(n), 100); err != nil {
			return err
		}
	}
	// What has not arrived after the grace counts as held back; the figures
	// are reported either way.
	_ = waitCount(ctx, pool, `SELECT count(*) FROM ledger_transactions WHERE kind = 'credit' AND reference LIKE 'stripe:pi_b_%'`, n, backoffGrace)

	inBackoff, others, err := backoffLatencies(ctx, pool)
	if err != nil {
		return err
	}
	var still int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM payouts WHERE status = 'RETRYING'`).Scan(&still); err != nil {
		return err
	}
	sortDurations(inBackoff.done)
	sortDurations(others.done)
	pw, po := inBackoff.p99(), others.p99()
	ratio := float64(pw) / float64(max(po, time.Microsecond))
	times := fmt.Sprintf("%.2f×", ratio)
	if pw < 0 || po < 0 {
		times = "∞×"
	}
	result := fmt.Sprintf("%s vs %s = %s (p50 %s vs %s)", p99String(pw), p99String(po), times,
		p99String(inBackoff.at(0.5)), p99String(others.at(0.5)))
	if inBackoff.missing > 0 || others.missing > 0 {
		result += fmt.Sprintf(" (%d + %d credits not applied %s after the phase)", inBackoff.missing, others.missing, backoffGrace)
	}
	r.add(Row{"backoff", fmt.Sprintf("credits of wallets with a payout waiting for its retry (429, Retry-After %ds; %d of them still waiting at the end), p99 outbox to ledger, vs the other wallets' p99 (%d credits/s over %d wallets, %d credits)",
		backoffRetryAfter, still, backoffRate, backoffUsers, n),
		result, "≤ 1.5× (within the normal p99)", verdict(inBackoff.missing == 0 && others.missing == 0 && ratio <= 1.5)})
	return nil
}

// backoffGroup is the credits of one group of wallets: the applied ones'
// latencies and how many were not applied.
type backoffGroup struct {
	done    []time.Duration
	missing int
}

// p99 of the group (at).
func (g backoffGroup) p99() time.Duration { return g.at(0.99) }

// at is the group's p-quantile, counting a missing credit as slower than
// any applied; -1 when it is a missing one.
func (g backoffGroup) at(p float64) time.Duration {
	all := len(g.done) + g.missing
	if all == 0 {
		return 0
	}
	i := int(float64(all-1) * p)
	if i >= len(g.done) {
		return -1
	}
	return g.done[i]
}

func p99String(d time.Duration) string {
	if d < 0 {
		return "not applied"
	}
	return ms(d)
}

// backoffLatencies reads each measured credit's time from its outbox row's
// commit to its ledger transaction's, split by whether its wallet has a
// payout in RETRYING.
func backoffLatencies(ctx context.Context, pool *pgxpool.Pool) (inBackoff, others backoffGroup, err error) {
	rows, err := pool.Query(ctx, `
		SELECT EXISTS (SELECT 1 FROM payouts p WHERE p.user_id = o.partition_key AND p.status = 'RETRYING'),
		       extract(epoch FROM l.created_at - o.created_at)::float8
		FROM `+published.All+` o
		LEFT JOIN ledger_transactions l ON l.kind = 'credit' AND l.reference = 'stripe:' || (o.payload->>'reference')
		WHERE o.topic = $1 AND o.payload->>'reference' LIKE 'pi_b_%'`, kafkax.TopicWebhookPending)
	if err != nil {
		return inBackoff, others, fmt.Errorf("read credit latencies: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var waiting bool
		var secs *float64
		if err := rows.Scan(&waiting, &secs); err != nil {
			return inBackoff, others, err
		}
		g := &others
		if waiting {
			g = &inBackoff
		}
		if secs == nil {
			g.missing++
			continue
		}
		g.done = append(g.done, time.Duration(*secs*float64(time.Second)))
	}
	return inBackoff, others, rows.Err()
}

func backoffUser(u int) string { return "bench-user-" + strconv.Itoa(u) }

// backoffCredit writes a verified Stripe payment for wallet u to the outbox
// as webhook-api does: on the user's key, with a NOTIFY for the relay.
// The event carries webhook-api's proof (keys), without which the worker
// moves no money.
func backoffCredit(ctx context.Context, pool *pgxpool.Pool, keys *eventproof.Keys, u int, ref string, amount int64) error {
	user := backoffUser(u)
	e := event.PSPEvent{Provider: "stripe", EventID: "evt_" + ref, Type: "payment_intent.succeeded", Action: event.ActionCredit,
		UserID: user, Amount: amount, Currency: "usd", Reference: ref, OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return backoffWrite(ctx, pool, nil, outbox.Message{Topic: kafkax.TopicWebhookPending, EventType: e.Type, PartitionKey: user, Payload: b,
		Headers: map[string]string{kafkax.HeaderMessageID: e.MessageID(), kafkax.HeaderEventType: e.Type,
			eventproof.Header: keys.Sign(e)}})
}

// backoffPayout creates a payout of wallet u and writes its command to the
// outbox as webhook-api does, in one transaction.
func backoffPayout(ctx context.Context, pool *pgxpool.Pool, u int) error {
	user, id := backoffUser(u), uuid.NewString()
	b, err := json.Marshal(event.PayoutRequested{PayoutID: id, UserID: user, Amount: 100, Currency: "usd", Provider: "stripe"})
	if err != nil {
		return err
	}
	typ := string(event.TypePayoutRequested)
	return backoffWrite(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO payouts (id, client_id, idempotency_key, request_hash, user_id, amount, currency, destination, provider)
			VALUES ($1::uuid, 'bench', $1, 'h', $2, 100, 'usd', 'acct_bench', 'stripe')`, id, user)
		return err
	}, outbox.Message{Topic: kafkax.TopicTransactions, EventType: typ, PartitionKey: user, Payload: b,
		Headers: map[string]string{kafkax.HeaderMessageID: event.PayoutRequestID(id), kafkax.HeaderEventType: typ}})
}

// backoffWrite runs before (if any) and inserts m in one transaction that
// notifies the relay on commit.
func backoffWrite(ctx context.Context, pool *pgxpool.Pool, before func(pgx.Tx) error, m outbox.Message) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if before != nil {
		if err := before(tx); err != nil {
			return err
		}
	}
	if _, err := outbox.Insert(ctx, tx, m); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, outbox.NotifyChannel); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// pspFaults replaces (PUT) or clears (DELETE) the stand-in's faults.
func pspFaults(ctx context.Context, method, pspURL, spec string) error {
	req, err := http.NewRequestWithContext(ctx, method, pspURL+"/_psp/faults", bytes.NewReader([]byte(spec)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("psp faults: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("psp faults: %s: %s", resp.Status, body)
	}
	return nil
}
