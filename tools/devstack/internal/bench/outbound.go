package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbound"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

// The outbound scenario: settlement events committed to the outbox go the
// whole way out of Aegis: relayed to aegis.settlements, taken in by
// outbox-relay's intake, delivered by its dispatcher to one endpoint, a
// receiver in this process that verifies every delivery with the Standard
// Webhooks library.
const (
	// outboundBacklog events are committed at once for the delivery rate.
	outboundBacklog = 5_000
	// outboundWarmUp events go first: the intake's group join, the
	// connections.
	outboundWarmUp = 100
	// outboundUsers spread the events over users (the topic's keys).
	outboundUsers = 500
	// outboundWait bounds each wait for deliveries to arrive.
	outboundWait = 5 * time.Minute
)

// outboundReceiver is the endpoint: it verifies each delivery and notes
// when each event id first arrived.
type outboundReceiver struct {
	wh *standardwebhooks.Webhook

	mu         sync.Mutex
	arrived    map[string]time.Time
	duplicates int
	unverified int
	firstErr   string
}

func (rc *outboundReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	now := time.Now()
	if err := rc.wh.Verify(body, r.Header); err != nil {
		rc.mu.Lock()
		rc.unverified++
		if rc.firstErr == "" {
			rc.firstErr = err.Error()
		}
		rc.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	id := r.Header.Get(outbound.HeaderID)
	rc.mu.Lock()
	if _, seen := rc.arrived[id]; seen {
		rc.duplicates++
	} else {
		rc.arrived[id] = now
	}
	rc.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// count is how many distinct events arrived, and the last arrival.
func (rc *outboundReceiver) count() (n int, last time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, t := range rc.arrived {
		if t.After(last) {
			last = t
		}
	}
	return len(rc.arrived), last
}

func (rc *outboundReceiver) arrival(id string) (time.Time, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	t, ok := rc.arrived[id]
	return t, ok
}

// waitFor waits until want distinct events arrived, or outboundWait.
func (rc *outboundReceiver) waitFor(ctx context.Context, want int) (time.Time, error) {
	deadline := time.Now().Add(outboundWait)
	for {
		n, last := rc.count()
		if n >= want {
			return last, nil
		}
		if time.Now().After(deadline) {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			return last, fmt.Errorf("%d of %d events delivered after %s (%d unverified, first: %s)", n, want, outboundWait, rc.unverified, rc.firstErr)
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// settlementMessages are n payout.succeeded events as payout-worker writes
// them to the outbox (a valid settlements event each: the intake
// dead-letters anything else).
func settlementMessages(n int, seq *int) []outbox.Message {
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		*seq++
		user := "bench-user-" + strconv.Itoa(*seq%outboundUsers)
		ev := event.NewPayoutOutcome(event.TypePayoutSucceeded, uuid.NewString(), "SUCCEEDED", user, int64(100+*seq%900), "usd", "stripe", time.Now())
		body, _ := json.Marshal(ev) // plain structs: cannot fail
		msgs[i] = outbox.Message{Topic: kafkax.TopicSettlements, EventType: string(ev.Type), PartitionKey: user, Payload: body,
			Headers: map[string]string{kafkax.HeaderEventType: string(ev.Type), kafkax.HeaderMessageID: ev.EventID}}
	}
	return msgs
}

// eventIDOf is the event id of a settlement message.
func eventIDOf(m outbox.Message) string { return m.Headers[kafkax.HeaderMessageID] }

// insertMessages commits msgs in transactions of at most 1,000.
func insertMessages(ctx context.Context, pool *pgxpool.Pool, msgs []outbox.Message) error {
	for len(msgs) > 0 {
		n := min(len(msgs), 1000)
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			if err := outbox.Queue(ctx, b, msgs[:n], nil); err != nil {
				return err
			}
			return tx.SendBatch(ctx, b).Close()
		})
		if err != nil {
			return fmt.Errorf("insert settlement events: %w", err)
		}
		msgs = msgs[n:]
	}
	_, err := pool.Exec(ctx, `SELECT pg_notify($1, '')`, outbox.NotifyChannel)
	return err
}

// outbound measures outbound delivery: the rate a backlog of settlement
// events reaches one local endpoint, and the commit → receipt latency at
// half that rate.
func (r *Runner) outbound(ctx context.Context) error {
	r.progress("outbound: bare two-table pgbench baseline, %d clients, %s", benchClients, r.cfg.Duration)
	bare, err := r.bareBaseline(ctx, r.cfg.Duration)
	if err != nil {
		return fmt.Errorf("bare baseline: %w", err)
	}
	dbURL, pool, err := r.freshDB(ctx, "aegis_bench_outbound")
	if err != nil {
		return err
	}
	defer pool.Close()

	secret, err := outbound.NewSecret()
	if err != nil {
		return err
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	rc := &outboundReceiver{wh: wh, arrived: map[string]time.Time{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: rc, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends with Close
	defer srv.Close()
	// The endpoint as dlq-admin's API would create it (the bench measures
	// delivery, not the API).
	if _, err := pool.Exec(ctx, `INSERT INTO outbound_endpoints (url, description, secret, created_by) VALUES ($1, 'bench', $2, 'bench')`,
		"http://"+ln.Addr().String()+"/aegis", secret); err != nil {
		return fmt.Errorf("register the endpoint: %w", err)
	}

	kport, err := proctest.Port()
	if err != nil {
		return err
	}
	rport, err := proctest.Port()
	if err != nil {
		return err
	}
	s := r.newStack()
	defer func() { _ = s.Stop(20 * time.Second) }() // a bench run reports its figures, not the teardown
	if err := s.Launch("kafka", "aegis-kafka", map[string]string{"KAFKA_PORT": strconv.Itoa(kport), "KAFKA_PARTITIONS": strconv.Itoa(partitions)}); err != nil {
		return err
	}
	if err := s.Launch("outbox-relay", "outbox-relay", map[string]string{
		"DATABASE_URL": dbURL, "KAFKA_BROKERS": fmt.Sprintf("127.0.0.1:%d", kport), "HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", rport),
		"LOG_LEVEL": "warn", "OUTBOUND_ALLOW_HTTP": "true", "OUTBOUND_ALLOW_PRIVATE": "true",
	}); err != nil {
		return err
	}
	if err := s.WaitHTTP(ctx, stack.URL(rport)+"/readyz"); err != nil {
		return err
	}

	seq := 0
	r.progress("outbound: warm-up, %d events", outboundWarmUp)
	if err := insertMessages(ctx, pool, settlementMessages(outboundWarmUp, &seq)); err != nil {
		return err
	}
	if _, err := rc.waitFor(ctx, outboundWarmUp); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}

	r.progress("outbound: a backlog of %d settlement events committed at once", outboundBacklog)
	start := time.Now()
	if err := insertMessages(ctx, pool, settlementMessages(outboundBacklog, &seq)); err != nil {
		return err
	}
	last, err := rc.waitFor(ctx, outboundWarmUp+outboundBacklog)
	if err != nil {
		return fmt.Errorf("backlog: %w", err)
	}
	took := last.Sub(start)
	rate := float64(outboundBacklog) / took.Seconds()
	r.add(Row{"outbound", fmt.Sprintf("deliver %dk settlement events committed at once (%d users) to one local endpoint: "+
		"outbox → relay → Kafka → intake → dispatcher → signed POST, verified; one relay", outboundBacklog/1000, outboundUsers),
		fmt.Sprintf("%.0f events/s (%.1f s) = %.2f× bare pgbench (%.0f tx/s)", rate, took.Seconds(), rate/bare, bare), "—", ""})

	steady := max(10, math.Round(rate/2/10)*10)
	p50, p99, n, err := r.outboundLatency(ctx, pool, rc, steady, &seq)
	if err != nil {
		return err
	}
	rc.mu.Lock()
	dups, unverified := rc.duplicates, rc.unverified
	rc.mu.Unlock()
	r.add(Row{"outbound", fmt.Sprintf("commit → receipt latency at a steady %.0f events/s (half the backlog rate) for %s, p50 / p99 "+
		"(from the outbox row's commit to the receiver's verified arrival)", steady, r.cfg.Duration),
		fmt.Sprintf("%s / %s (%d events; %d duplicates, %d unverified in the whole run)", ms(p50), ms(p99), n, dups, unverified), "—", ""})
	if unverified > 0 {
		return fmt.Errorf("%d deliveries failed Standard Webhooks verification", unverified)
	}
	return nil
}

// outboundLatency commits one settlement event at a time at rate for the
// load phase and returns the commit → receipt latency's p50 and p99.
func (r *Runner) outboundLatency(ctx context.Context, pool *pgxpool.Pool, rc *outboundReceiver, rate float64, seq *int) (p50, p99 time.Duration, n int, err error) {
	r.progress("outbound: commit → receipt latency at %.0f events/s for %s", rate, r.cfg.Duration)
	notifier := outbox.NewNotifier(pool, outbox.NotifyInterval, slog.New(slog.DiscardHandler))
	nctx, stopNotifier := context.WithCancel(ctx)
	defer stopNotifier()
	go func() { _ = notifier.Run(nctx) }() // ends with nctx; the bench measures delivery, not the notifier
	total := int(r.cfg.Duration.Seconds() * rate)
	msgs := settlementMessages(total, seq)
	committed := make([]time.Time, total)
	jobs := make(chan int, total)
	var wg sync.WaitGroup
	var insertErr error
	var errOnce sync.Once
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					_, err := outbox.Insert(ctx, tx, msgs[i])
					return err
				})
				if err != nil {
					errOnce.Do(func() { insertErr = err })
					continue
				}
				committed[i] = time.Now()
				notifier.Notify() // as a writer does after its commit
			}
		}()
	}
	ticker := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer ticker.Stop()
	begin := time.Now()
	for i := 0; i < total; {
		<-ticker.C
		// A late tick (the scheduler) sends what is due, keeping the rate.
		due := min(int(time.Since(begin).Seconds()*rate)+1, total)
		for ; i < due; i++ {
			jobs <- i
		}
	}
	close(jobs)
	wg.Wait()
	if insertErr != nil {
		return 0, 0, 0, fmt.Errorf("insert settlement events: %w", insertErr)
	}
	if _, err := rc.waitFor(ctx, *seq); err != nil {
		return 0, 0, 0, fmt.Errorf("steady load: %w", err)
	}
	lat := make([]time.Duration, 0, total)
	for i, m := range msgs {
		if at, ok := rc.arrival(eventIDOf(m)); ok {
			lat = append(lat, at.Sub(committed[i]))
		}
	}
	sortDurations(lat)
	return percentile(lat, 0.5), percentile(lat, 0.99), len(lat), nil
}
