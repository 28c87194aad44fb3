package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/proctest"
)

const (
	drainRows  = 100_000
	drainKeys  = 10_000
	partitions = 12
)

// relay measures the drain rate of a backlog and the commit-to-Kafka latency
// at a steady 1,000 events/s.
func (r *Runner) relay(ctx context.Context) error {
	url, pool, err := r.freshDB(ctx, "aegis_bench_relay")
	if err != nil {
		return err
	}
	defer pool.Close()
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
	brokers := fmt.Sprintf("127.0.0.1:%d", kport)

	r.progress("relay: inserting %d pending 1 KiB rows over %d keys", drainRows, drainKeys)
	if _, err := pool.Exec(ctx, `
		INSERT INTO transaction_outbox (topic, event_type, partition_key, payload, headers, correlation_id)
		SELECT 'aegis.webhook.pending', 'bench', 'user-' || (i % $2), jsonb_build_object('i', i, 'pad', repeat('x', 1000)),
		       '{"event_type":"bench"}', 'corr-' || i
		FROM generate_series(1, $1) i`, drainRows, drainKeys); err != nil {
		return err
	}
	r.progress("relay: draining with one relay process")
	start := time.Now()
	env := map[string]string{
		"DATABASE_URL": url, "KAFKA_BROKERS": brokers, "HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", rport), "LOG_LEVEL": "warn",
	}
	for _, k := range []string{"RELAY_BATCH_SIZE", "RELAY_WORKERS", "LOG_LEVEL", "GOMAXPROCS", "PPROF_ADDR"} {
		if v := os.Getenv(k); v != "" {
			env[k] = v // experiments: make bench RELAY_BATCH_SIZE=...
		}
	}
	if err := s.Launch("outbox-relay", "outbox-relay", env); err != nil {
		return err
	}
	if err := waitDrained(ctx, pool, start, drainRows); err != nil {
		return err
	}
	drain := time.Since(start)
	// The relay deletes a row it published and keeps one it dead-lettered.
	var left int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM transaction_outbox").Scan(&left); err != nil {
		return err
	}
	if left != 0 {
		return fmt.Errorf("relay finished with %d of %d rows not published", left, drainRows)
	}
	if err := checkOnKafka(ctx, brokers, drainRows); err != nil {
		return err
	}
	rate := float64(drainRows) / drain.Seconds()
	r.add(Row{"relay", fmt.Sprintf("drain %dk pending 1 KiB rows (%dk keys) into Kafka, one relay", drainRows/1000, drainKeys/1000),
		fmt.Sprintf("%.0f rows/s (%.1f s)", rate, drain.Seconds()), "≥ 20,000 rows/s", verdict(rate >= 20000)})

	if err := r.relayHotKey(ctx, pool, rate); err != nil {
		return err
	}
	// The peers run right after the relay's drain, while the machine's load
	// is what the relay saw (the idle relay only polls an empty index).
	if err := r.relayPeers(ctx, pool, brokers, rate); err != nil {
		return err
	}
	return r.relayLatency(ctx, pool, brokers)
}

const hotRows = 10_000

// relayHotKey drains a backlog of one key: the relay takes a run of the
// key's consecutive rows per claim, so it must not fall to one row per
// cycle.
func (r *Runner) relayHotKey(ctx context.Context, pool *pgxpool.Pool, manyKeys float64) error {
	r.progress("relay: hot key, %dk rows of one key", hotRows/1000)
	start := time.Now()
	// One transaction, and the NOTIFY a writer sends after its commit
	// wakes the idle relay.
	if _, err := pool.Exec(ctx, `
		INSERT INTO transaction_outbox (topic, event_type, partition_key, payload, headers, correlation_id)
		SELECT 'aegis.webhook.pending', 'bench', 'user-hot', jsonb_build_object('i', i, 'pad', repeat('x', 1000)),
		       '{"event_type":"bench"}', 'hot-' || i
		FROM generate_series(1, $1) i`, hotRows); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `SELECT pg_notify($1, '')`, outbox.NotifyChannel); err != nil {
		return err
	}
	if err := waitDrained(ctx, pool, start, hotRows); err != nil {
		return err
	}
	drain := time.Since(start)
	var left int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM transaction_outbox WHERE partition_key = 'user-hot'").Scan(&left); err != nil {
		return err
	}
	if left != 0 {
		return fmt.Errorf("relay finished the hot key with %d of %d rows not published", left, hotRows)
	}
	rate := float64(hotRows) / drain.Seconds()
	ratio := rate / manyKeys
	r.add(Row{"relay", fmt.Sprintf("hot key: drain %dk pending 1 KiB rows of one key, in order, as a share of the many-keys rate", hotRows/1000),
		fmt.Sprintf("%.0f rows/s = %.2f× (%.1f s)", rate, ratio, drain.Seconds()), "≥ 0.1×", verdict(ratio >= 0.1)})
	return nil
}

// waitDrained polls until no unfinished outbox row is left. It asks the
// partial index of unfinished rows whether any is left, which costs next to
// nothing; counting the table every 20 ms would take a good part of a core
// from the Postgres being measured.
func waitDrained(ctx context.Context, pool *pgxpool.Pool, start time.Time, rows int) error {
	for {
		var left bool
		if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM transaction_outbox WHERE finished_at IS NULL)").Scan(&left); err != nil {
			return err
		}
		if !left {
			return nil
		}
		if time.Since(start) > 5*time.Minute {
			return fmt.Errorf("relay did not drain %d rows in 5 minutes", rows)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// watermillBatches are the Watermill subscriber batch sizes measured: its
// default (DefaultPostgreSQLSchema.SubscribeBatchSize 0 means 100) and the
// best-tuned size found here (7.6k rows/s at 10,000 when first measured).
var watermillBatches = []int{100, 10_000}

// relayPeers drains the same backlog with the peers, after the relay has
// stopped, and reports the relay's rate as a multiple of the best-tuned
// Watermill forwarder's (the 3× target) and of the naive loop's.
func (r *Runner) relayPeers(ctx context.Context, pool *pgxpool.Pool, brokers string, ours float64) error {
	wm, err := r.watermillForwarder(ctx, pool, brokers, watermillBatches)
	if err != nil {
		return err
	}
	best, bestName := 0.0, ""
	for i, b := range watermillBatches {
		name := fmt.Sprintf("Watermill v1.5 forwarder (watermill-sql v4 default Postgres schema), subscriber batch %d", b)
		if i == 0 {
			name += " (default)"
		}
		r.add(Row{"relay peer", "drain the same backlog into the same kfake: " + name, wm[i].String(), "", ""})
		if wm[i].perSecond() > best {
			best, bestName = wm[i].perSecond(), fmt.Sprintf("Watermill, batch %d", b)
		}
	}
	naive, err := r.naiveLoop(ctx, pool, brokers)
	if err != nil {
		return err
	}
	r.add(Row{"relay peer", fmt.Sprintf("drain the same backlog: naive SELECT … FOR UPDATE SKIP LOCKED LIMIT %d → produce → DELETE, %d loops", naiveBatch, naiveWorkers),
		naive.String(), "", ""})
	ratio := ours / best
	r.add(Row{"relay", "drain rate ÷ the best-tuned Watermill forwarder's in the same run (" + bestName + ")",
		fmt.Sprintf("%.2f×", ratio), "≥ 3×", verdict(ratio >= 3)})
	// The naive loop keeps none of the relay's promises (per-key order,
	// leases, retries, dead letters), so it is a reference for the Postgres
	// work a row can cost, not a peer the 3× target applies to.
	r.add(Row{"relay", "drain rate ÷ the naive loop's in the same run (no per-key order, lease or retry state: a reference, not a peer)",
		fmt.Sprintf("%.2f×", ours/naive.perSecond()), "—", ""})
	return nil
}

func checkOnKafka(ctx context.Context, brokers string, want int64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, kafkax.TopicWebhookPending)
	if err != nil {
		return err
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total < want {
		return fmt.Errorf("only %d of %d records reached Kafka", total, want)
	}
	return nil
}

// relayLatency inserts outbox rows at a steady 1,000/s, each in its own
// committed transaction, and measures from each commit to the record's
// arrival at a Kafka consumer.
func (r *Runner) relayLatency(ctx context.Context, pool *pgxpool.Pool, brokers string) error {
	const rate = 1000
	if err := vacuumIfAutovacuumIsOff(ctx, r, pool, "relay"); err != nil {
		return err
	}
	r.progress("relay: commit-to-Kafka latency at %d events/s for %s", rate, r.cfg.Duration)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics("aegis.bench.latency"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := kafkax.EnsureTopics(ctx, cl, partitions, "aegis.bench.latency"); err != nil {
		return err
	}
	var mu sync.Mutex
	committed := map[int64]time.Time{}
	arrived := map[int64]time.Time{}
	cctx, stopConsumer := context.WithCancel(ctx)
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		for cctx.Err() == nil {
			fs := cl.PollFetches(cctx)
			now := time.Now()
			fs.EachRecord(func(rec *kgo.Record) {
				var p struct {
					Seq int64 `json:"seq"`
				}
				if json.Unmarshal(rec.Value, &p) == nil {
					mu.Lock()
					if _, seen := arrived[p.Seq]; !seen {
						arrived[p.Seq] = now
					}
					mu.Unlock()
				}
			})
		}
	}()
	time.Sleep(time.Second) // the consumer joins

	notifier := outbox.NewNotifier(pool, outbox.NotifyInterval, slog.New(slog.DiscardHandler))
	nctx, stopNotifier := context.WithCancel(ctx)
	defer stopNotifier()
	go func() { _ = notifier.Run(nctx) }() // ends with nctx; the bench measures the relay, not the notifier
	total := int(r.cfg.Duration.Seconds()) * rate
	// One commit per millisecond, as evenly as the clock allows: bursts
	// would let one NOTIFY serve many rows and flatter the latency.
	ticker := time.NewTicker(time.Second / rate)
	defer ticker.Stop()
	jobs := make(chan int64, rate)
	var wg sync.WaitGroup
	var insertErr error
	var errOnce sync.Once
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range jobs {
				payload := []byte(fmt.Sprintf(`{"seq":%d,"pad":"%0900d"}`, seq, 0))
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					_, err := outbox.Insert(ctx, tx, outbox.Message{Topic: "aegis.bench.latency", EventType: "bench",
						PartitionKey: fmt.Sprintf("user-%d", seq%drainKeys), Payload: payload})
					return err
				})
				if err != nil {
					errOnce.Do(func() { insertErr = err })
					continue
				}
				now := time.Now()
				notifier.Notify() // as a writer does after its commit
				mu.Lock()
				committed[seq] = now
				mu.Unlock()
			}
		}()
	}
	var seq int64
	begin := time.Now()
	for seq < int64(total) {
		<-ticker.C
		// A late tick (the scheduler) sends what is due, keeping the rate.
		due := min(int64(time.Since(begin)*rate/time.Second)+1, int64(total))
		for ; seq < due; seq++ {
			jobs <- seq
		}
	}
	close(jobs)
	wg.Wait()
	if insertErr != nil {
		stopConsumer()
		<-consumerDone
		return insertErr
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(arrived)
		mu.Unlock()
		if n >= total || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopConsumer()
	<-consumerDone
	var lat []time.Duration
	skip := int64(2 * rate) // the first two seconds warm up
	for s := skip; s < int64(total); s++ {
		c, ok1 := committed[s]
		a, ok2 := arrived[s]
		if !ok1 || !ok2 {
			return fmt.Errorf("record %d was committed but never reached Kafka", s)
		}
		d := a.Sub(c)
		if d < 0 {
			d = 0
		}
		lat = append(lat, d)
	}
	sortDurations(lat)
	p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
	r.add(Row{"relay", fmt.Sprintf("commit → Kafka consumer latency at a steady %d events/s, p50 / p99", rate),
		ms(p50) + " / " + ms(p99), "p50 ≤ 5 ms, p99 ≤ 50 ms", verdict(p50 <= 5*time.Millisecond && p99 <= 50*time.Millisecond)})
	return nil
}
