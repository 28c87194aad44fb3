package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/breaker"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/panics"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/relay"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// clock is real time plus a settable offset, so tests jump over backoff
// delays and leases while rows inserted "now" are always due.
type clock struct{ offset atomic.Int64 }

func newClock() *clock               { return &clock{} }
func (c *clock) Now() time.Time      { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Add(d time.Duration) { c.offset.Add(int64(d)) }

type bundle struct {
	db      *pgtest.DB
	cluster *kfake.Cluster
	clock   *clock
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return &bundle{db: pgtest.New(t), cluster: kafkatest.NewCluster(t), clock: newClock()}
}

type relayOpts struct {
	owner           string
	brokers         []string
	publishTimeout  time.Duration
	breakerFailures uint32
	batch           int
	now             func() time.Time
	wrap            func(relay.Producer) relay.Producer
	panics          *panics.Counter
	poll            time.Duration
	kafkaOpts       []kgo.Opt
	// backoff replaces the default retry policy (the full ceiling, from 1s).
	backoff *backoff.Policy
}

func (b *bundle) newRelay(t *testing.T, o relayOpts) (*relay.Relay, *breaker.Breaker[struct{}]) {
	t.Helper()
	if o.owner == "" {
		o.owner = "relay-test"
	}
	if o.brokers == nil {
		o.brokers = b.cluster.ListenAddrs()
	}
	if o.publishTimeout == 0 {
		o.publishTimeout = 5 * time.Second
	}
	if o.breakerFailures == 0 {
		o.breakerFailures = 100
	}
	if o.batch == 0 {
		o.batch = 100
	}
	if o.now == nil {
		o.now = b.clock.Now
	}
	if o.poll == 0 {
		o.poll = 20 * time.Millisecond
	}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	cl, err := kafkax.NewClient(o.brokers, logger, append(append(relay.ClientOpts(), kgo.RecordDeliveryTimeout(o.publishTimeout), kgo.RecordRetries(3)), o.kafkaOpts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	reg := prometheus.NewRegistry()
	br, err := breaker.New[struct{}](breaker.Config{Name: "kafka", ConsecutiveFailures: o.breakerFailures, OpenFor: time.Hour, HalfOpenProbes: 1}, logger, breaker.NewMetrics(reg))
	require.NoError(t, err)
	// The whole ceiling, not full jitter (pkg/backoff tests that): a retry
	// drawn a few milliseconds away would be due again inside the drain that
	// failed it, and a test could not see the row waiting.
	policy := backoff.Policy{Base: time.Second, Multiplier: 2, Max: 30 * time.Second, MaxAttempts: 6,
		Jitter: func(ceiling time.Duration) time.Duration { return ceiling }}
	if o.backoff != nil {
		policy = *o.backoff
	}
	var producer relay.Producer = cl
	if o.wrap != nil {
		producer = o.wrap(cl)
	}
	r, err := relay.New(relay.Config{
		Owner: o.owner, BatchSize: o.batch, PollInterval: o.poll, Lease: 4 * o.publishTimeout,
		PublishTimeout: o.publishTimeout,
		Backoff:        policy,
	}, relay.Deps{
		Deps:  lifecycle.Deps{Logger: logger, Clock: o.now, Registerer: reg, Panics: o.panics},
		Store: outbox.NewStore(b.db.Pool), Kafka: producer, Breaker: br,
	})
	require.NoError(t, err)
	return r, br
}

func (b *bundle) insert(t *testing.T, key string, n int, maxRetries int) int64 {
	t.Helper()
	var id int64
	err := database.InTx(context.Background(), b.db.Pool, func(tx pgx.Tx) error {
		var err error
		id, err = outbox.Insert(context.Background(), tx, testMessage(key, n, maxRetries))
		return err
	})
	require.NoError(t, err)
	return id
}

// testMessage is the n-th test message of key.
func testMessage(key string, n, maxRetries int) outbox.Message {
	return outbox.Message{
		Topic: kafkax.TopicWebhookPending, EventType: "test.event", PartitionKey: key,
		Payload: []byte(fmt.Sprintf(`{"key":%q,"n":%d}`, key, n)), CorrelationID: fmt.Sprintf("corr-%s-%d", key, n),
		Headers:    map[string]string{kafkax.HeaderEventType: "test.event"},
		MaxRetries: maxRetries,
	}
}

// insertMany commits n rows in one transaction, row i under key(i): a
// backlog at the cost of one commit, not n.
func (b *bundle) insertMany(t *testing.T, n int, key func(int) string) {
	t.Helper()
	err := database.InTx(context.Background(), b.db.Pool, func(tx pgx.Tx) error {
		for i := range n {
			if _, err := outbox.Insert(context.Background(), tx, testMessage(key(i), i, 0)); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
}

// published is the status of a row that is gone: the relay deletes a row
// once Kafka has acknowledged it.
const published = "published (deleted)"

func (b *bundle) status(t *testing.T, id int64) (status string, retries int) {
	t.Helper()
	err := b.db.Pool.QueryRow(context.Background(),
		"SELECT status, retry_count FROM transaction_outbox WHERE id = $1", id).Scan(&status, &retries)
	if errors.Is(err, pgx.ErrNoRows) {
		return published, 0
	}
	require.NoError(t, err)
	return status, retries
}

// left counts the rows still in the outbox.
func (b *bundle) left(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM transaction_outbox").Scan(&n))
	return n
}

func drain(t *testing.T, r *relay.Relay) {
	t.Helper()
	for range 1000 {
		n, err := r.Cycle(context.Background())
		require.NoError(t, err)
		if n == 0 {
			return
		}
	}
	t.Fatal("relay never drained")
}

type payload struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

func decode(t *testing.T, recs []*kgo.Record) []payload {
	t.Helper()
	out := make([]payload, len(recs))
	for i, r := range recs {
		require.NoError(t, json.Unmarshal(r.Value, &out[i]))
		require.Equal(t, out[i].Key, string(r.Key), "record key is the partition key")
	}
	return out
}

func TestPublishesEveryRowWithKeyAndHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r, _ := b.newRelay(t, relayOpts{})
	var ids []int64
	for k := range 5 {
		for n := range 4 {
			ids = append(ids, b.insert(t, fmt.Sprintf("user-%d", k), n, 0))
		}
	}
	drain(t, r)

	recs := kafkatest.ReadAll(t, b.cluster, kafkax.TopicWebhookPending, 20, 10*time.Second)
	require.Len(t, recs, 20)
	for _, rec := range recs {
		require.Equal(t, "test.event", kafkax.Header(rec, kafkax.HeaderEventType))
		require.NotEmpty(t, kafkax.Header(rec, kafkax.HeaderCorrelationID))
	}
	for _, id := range ids {
		st, _ := b.status(t, id)
		require.Equal(t, published, st)
	}
}

func TestKafkaUnreachableRetriesWithBackoffThenDeadLettersInTheSameTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A broker address nothing listens on: every publish times out.
	r, _ := b.newRelay(t, relayOpts{brokers: []string{"127.0.0.1:1"}, publishTimeout: time.Second})
	id := b.insert(t, "user-x", 1, 3)

	var nextRetries []time.Time
	for attempt := 1; attempt <= 3; attempt++ {
		// The retry is scheduled from the cycle's clock reading; Postgres
		// keeps microseconds.
		cycleStart := b.clock.Now().Truncate(time.Microsecond)
		n, err := r.Cycle(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, n, "attempt %d", attempt)
		st, retries := b.status(t, id)
		if attempt < 3 {
			require.Equal(t, "failed", st)
			require.Equal(t, attempt, retries)
			var next time.Time
			require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT next_retry_at FROM transaction_outbox WHERE id = $1", id).Scan(&next))
			ceiling := time.Duration(1<<(attempt-1)) * time.Second
			require.False(t, next.Before(cycleStart), "next retry is not in the past")
			require.False(t, next.After(b.clock.Now().Add(ceiling)), "attempt %d waits at most %s", attempt, ceiling)
			nextRetries = append(nextRetries, next)
			if next.After(b.clock.Now()) {
				// Not due yet: nothing to claim.
				n, err = r.Cycle(context.Background())
				require.NoError(t, err)
				require.Zero(t, n, "a row waiting for its retry is not claimed early")
			}
			b.clock.Add(time.Minute)
			continue
		}
		require.Equal(t, "dlq", st)
		require.Equal(t, 3, retries)
	}
	var source, class, topic, errText, history string
	var outboxID int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `
		SELECT source, error_class, original_topic, error, retry_history::text, outbox_id FROM dead_letters`).
		Scan(&source, &class, &topic, &errText, &history, &outboxID))
	require.Equal(t, "relay", source)
	require.Equal(t, "transient", class)
	require.Equal(t, kafkax.TopicWebhookPending, topic)
	require.Equal(t, id, outboxID)
	var attempts []map[string]any
	require.NoError(t, json.Unmarshal([]byte(history), &attempts))
	require.Len(t, attempts, 3, "every failed attempt is in the history")
	require.Len(t, nextRetries, 2)
}

func TestMessageKafkaRejectsForGoodIsDeadLetteredAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: kafkax.TopicWebhookPending, Err: kerr.MessageTooLarge, Count: 1})
	r, _ := b.newRelay(t, relayOpts{})
	id := b.insert(t, "user-big", 1, 0)
	n, err := r.Cycle(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	st, retries := b.status(t, id)
	require.Equal(t, "dlq", st, "a permanent error spends no further attempts")
	require.Equal(t, 1, retries)
	var class string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT error_class FROM dead_letters WHERE outbox_id = $1", id).Scan(&class))
	require.Equal(t, "permanent", class)
	// Best effort copy on aegis.outbox.dlq.
	recs := kafkatest.ReadAll(t, b.cluster, kafkax.TopicOutboxDLQ, 1, 10*time.Second)
	require.Len(t, recs, 1)
	require.Equal(t, strconv.FormatInt(id, 10), kafkax.Header(recs[0], "outbox_id"))
}

func TestBreakerStopsClaimingWithoutSpendingAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r, br := b.newRelay(t, relayOpts{brokers: []string{"127.0.0.1:1"}, publishTimeout: time.Second, breakerFailures: 2})
	id := b.insert(t, "user-b", 1, 6)

	for range 2 {
		_, err := r.Cycle(context.Background())
		require.NoError(t, err)
		b.clock.Add(time.Minute)
	}
	require.Equal(t, breaker.Open, br.State())
	_, before := b.status(t, id)
	require.Equal(t, 2, before)
	for range 5 {
		n, err := r.Cycle(context.Background())
		require.Equal(t, errclass.BreakerOpen, errclass.Of(err))
		require.Zero(t, n)
		b.clock.Add(time.Minute)
	}
	st, after := b.status(t, id)
	require.Equal(t, "failed", st)
	require.Equal(t, before, after, "an open breaker spends no attempts")
}

func TestRowsOfADeadRelayAreTakenOverAfterTheLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.insert(t, "user-k", 1, 0)
	// A relay claims and dies before publishing.
	_, err := outbox.NewStore(b.db.Pool).Claim(context.Background(), b.clock.Now(), 10, time.Minute, "dead-relay")
	require.NoError(t, err)

	r, _ := b.newRelay(t, relayOpts{owner: "survivor"})
	n, err := r.Cycle(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "a live lease is respected")
	b.clock.Add(2 * time.Minute)
	n, err = r.Cycle(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	st, _ := b.status(t, id)
	require.Equal(t, published, st)
	require.Len(t, kafkatest.ReadAll(t, b.cluster, kafkax.TopicWebhookPending, 1, 10*time.Second), 1)
}

func TestRunFinishesTheBatchInFlightOnShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r, _ := b.newRelay(t, relayOpts{now: time.Now})
	for n := range 50 {
		b.insert(t, fmt.Sprintf("user-%d", n), n, 0)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	require.Eventually(t, func() bool { return b.left(t) < 50 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	var stuck int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM transaction_outbox WHERE status = 'processing'").Scan(&stuck))
	require.Zero(t, stuck, "no row is left claimed after a clean shutdown")
}

// TestPerKeyOrderWithThreeRelaysAndInjectedFailures is the ordering promise:
// records of one key reach Kafka in commit order across retries and replicas.
func TestPerKeyOrderWithThreeRelaysAndInjectedFailures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const keys, perKey = 12, 15
	// Every 7th produce request fails; the relays retry those rows.
	var produces atomic.Int64
	b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.UnknownServerError, Count: -1,
		When: func(kmsg.Request) bool { return produces.Add(1)%7 == 0 }})

	fast := func() time.Time { return time.Now().Add(time.Hour) } // every backoff is already due
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 3 {
		r, _ := b.newRelay(t, relayOpts{owner: fmt.Sprintf("relay-%d", i), batch: 5, now: fast})
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	// Writers commit concurrently with the relays.
	var writers sync.WaitGroup
	for k := range keys {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for n := range perKey {
				b.insert(t, fmt.Sprintf("user-%02d", k), n, 50)
			}
		}()
	}
	writers.Wait()
	require.Eventually(t, func() bool { return b.left(t) == 0 }, 60*time.Second, 20*time.Millisecond, "every row published despite failures")
	cancel()
	wg.Wait()
	require.Greater(t, produces.Load()/7, int64(0), "faults were injected")

	recs := kafkatest.ReadAll(t, b.cluster, kafkax.TopicWebhookPending, keys*perKey, 20*time.Second)
	seen := map[string]map[int]bool{}
	last := map[string]int{}
	for _, p := range decode(t, recs) {
		if seen[p.Key] == nil {
			seen[p.Key] = map[int]bool{}
			last[p.Key] = -1
		}
		if seen[p.Key][p.N] {
			continue // an at-least-once duplicate of an earlier record
		}
		require.Equal(t, last[p.Key]+1, p.N, "key %s: record %d arrived after %d", p.Key, p.N, last[p.Key])
		seen[p.Key][p.N] = true
		last[p.Key] = p.N
	}
	require.Len(t, seen, keys)
	for k, ns := range seen {
		require.Len(t, ns, perKey, "key %s lost records", k)
	}
}

// checkKeyOrder asserts that each key's records arrived in commit order
// (n = 0, 1, ...) counting only first arrivals, and that none is missing. It
// returns how many records were at-least-once duplicates.
func checkKeyOrder(t *testing.T, recs []*kgo.Record, perKey map[string]int) (duplicates int) {
	t.Helper()
	seen := map[string]map[int]bool{}
	last := map[string]int{}
	for _, p := range decode(t, recs) {
		if seen[p.Key] == nil {
			seen[p.Key] = map[int]bool{}
			last[p.Key] = -1
		}
		if seen[p.Key][p.N] {
			duplicates++
			continue
		}
		require.Equal(t, last[p.Key]+1, p.N, "key %s: record %d arrived after %d", p.Key, p.N, last[p.Key])
		seen[p.Key][p.N] = true
		last[p.Key] = p.N
	}
	require.Len(t, seen, len(perKey))
	for k, n := range perKey {
		require.Len(t, seen[k], n, "key %s lost records", k)
	}
	return duplicates
}

// TestHotKeyRunKeepsOrderWhenAProduceFailsMidRun: one key's rows go out as
// one run per cycle, split by franz-go into several produce requests; the
// second request fails. The rows before it are published, the first failed
// row is retried with an attempt spent, and every row behind it goes back
// without one and only after it.
func TestHotKeyRunKeepsOrderWhenAProduceFailsMidRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rows = 120
	// The first produce request that does not start the run (its batch's
	// base sequence is past 0) fails; kfake may ask When more than once per
	// request, so the request is recognised by its batch, not counted.
	var mu sync.Mutex
	faulted, over := "", false
	b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.UnknownServerError, Count: -1,
		When: func(req kmsg.Request) bool {
			for _, tp := range req.(*kmsg.ProduceRequest).Topics {
				for _, p := range tp.Partitions {
					var batch kmsg.RecordBatch
					if batch.ReadFrom(p.Records) != nil || batch.FirstSequence == 0 {
						continue
					}
					id := fmt.Sprintf("%d/%d/%d", batch.ProducerID, batch.ProducerEpoch, batch.FirstSequence)
					mu.Lock()
					defer mu.Unlock()
					if over {
						return false
					}
					if faulted == "" {
						faulted = id
					}
					return faulted == id
				}
			}
			return false
		}})
	// Small batches: the run of 120 rows needs several produce requests.
	// A retry is due a minute later, exactly (the clock is real time plus an
	// offset: a jittered delay of a few milliseconds would make the failed
	// row due again before the test looks).
	minute := backoff.Policy{Base: time.Minute, Multiplier: 1, Max: time.Minute, MaxAttempts: 6,
		Jitter: func(c time.Duration) time.Duration { return c }}
	r, _ := b.newRelay(t, relayOpts{batch: rows, kafkaOpts: []kgo.Opt{kgo.ProducerBatchMaxBytes(1500)}, backoff: &minute})
	ids := make([]int64, rows)
	for n := range rows {
		ids[n] = b.insert(t, "hot", n, 0)
	}

	n, err := r.Cycle(context.Background())
	require.NoError(t, err)
	require.Equal(t, rows, n, "the whole run of the hot key in one cycle")
	mu.Lock()
	require.NotEmpty(t, faulted, "the run took more than one produce request, and one failed")
	mu.Unlock()
	// A published (deleted) prefix, then the failed row, then rows handed back.
	i := 0
	for ; i < rows; i++ {
		if st, _ := b.status(t, ids[i]); st != published {
			break
		}
	}
	require.Positive(t, i, "the first produce request got through")
	require.Less(t, i, rows, "the second produce request failed")
	st, retries := b.status(t, ids[i])
	require.Equal(t, "failed", st)
	require.Equal(t, 1, retries)
	for _, id := range ids[i+1:] {
		st, retries := b.status(t, id)
		require.Equal(t, "pending", st, "row %d behind the failed row is handed back", id)
		require.Zero(t, retries, "row %d behind the failed row spends no attempt", id)
	}
	// Nothing behind the failed row is claimed before its retry is due.
	n, err = r.Cycle(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)

	// The fault was for the first cycle only: the retry (which may reuse
	// the failed batch's producer id and sequence) goes through.
	mu.Lock()
	over = true
	mu.Unlock()
	// Should the producer refuse a request again while it recovers from
	// the failed idempotent batch, the row is retried again, still ahead
	// of the rest.
	var left int
	for round := 0; round < 5; round++ {
		b.clock.Add(time.Minute + time.Second)
		drain(t, r)
		if left = b.left(t); left == 0 {
			break
		}
	}
	require.Zero(t, left)
	recs := kafkatest.ReadAll(t, b.cluster, kafkax.TopicWebhookPending, rows, 20*time.Second)
	dups := checkKeyOrder(t, recs, map[string]int{"hot": rows})
	require.Zero(t, dups, "the broker refused everything behind the failed batch: no record went out twice")
}

// TestHotKeyRunOfAKilledRelayIsTakenOverInOrder: a relay claims a run of a
// hot key, publishes part of it and dies without settling. Until its lease
// runs out nobody takes the key, not even the rows behind the run; then a
// survivor publishes the whole key again in order, and the only duplicates
// are the records the dead relay had published.
func TestHotKeyRunOfAKilledRelayIsTakenOverInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rows, run, sent = 150, 100, 40
	for n := range rows {
		b.insert(t, "hot", n, 0)
	}
	b.insert(t, "cold", 0, 0)
	claimed, err := outbox.NewStore(b.db.Pool).Claim(context.Background(), b.clock.Now(), run, time.Minute, "dead-relay")
	require.NoError(t, err)
	require.Len(t, claimed, run, "the hot key's run and the cold key's head")
	cl := kafkatest.NewClient(t, b.cluster)
	hot := 0
	for _, row := range claimed {
		if row.PartitionKey != "hot" || hot == sent {
			continue
		}
		hot++
		require.NoError(t, cl.ProduceSync(context.Background(),
			&kgo.Record{Topic: row.Topic, Key: []byte(row.PartitionKey), Value: row.Payload}).FirstErr())
	}
	// The dead relay is gone.

	r, _ := b.newRelay(t, relayOpts{owner: "survivor", batch: 30})
	n, err := r.Cycle(context.Background())
	require.NoError(t, err)
	require.Equal(t, 0, n, "a live lease holds the whole key, including the rows behind the run")
	b.clock.Add(2 * time.Minute)
	drain(t, r)
	require.Zero(t, b.left(t))
	recs := kafkatest.ReadAll(t, b.cluster, kafkax.TopicWebhookPending, rows+1+sent, 20*time.Second)
	dups := checkKeyOrder(t, recs, map[string]int{"hot": rows, "cold": 1})
	require.Equal(t, sent, dups, "only what the dead relay had published goes out twice")
}

// A published row is deleted when the relay settles it: no processed row
// is left for a retention to purge, the record is on Kafka, and a row that
// failed for good stays, settled dlq, beside its dead letter.
func TestSettleDeletesPublishedRowsAndKeepsDeadLetteredOnes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r, _ := b.newRelay(t, relayOpts{})
	ok := []int64{b.insert(t, "user-a", 0, 0), b.insert(t, "user-a", 1, 0), b.insert(t, "user-b", 0, 0)}
	drain(t, r)
	// Then one the broker refuses for good: dead-lettered at once.
	b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: kafkax.TopicWebhookPending, Err: kerr.MessageTooLarge, Count: 1})
	bad := b.insert(t, "user-c", 0, 0)
	drain(t, r)

	var rows []string
	got, err := b.db.Pool.Query(context.Background(), "SELECT id || ' ' || status FROM transaction_outbox ORDER BY id")
	require.NoError(t, err)
	rows, err = pgx.CollectRows(got, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{fmt.Sprintf("%d dlq", bad)}, rows, "published rows deleted; the dead-lettered row kept")
	var letters int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM dead_letters WHERE outbox_id = $1", bad).Scan(&letters))
	require.Equal(t, 1, letters)
	recs := kafkatest.ReadAll(t, b.cluster, kafkax.TopicWebhookPending, len(ok), 10*time.Second)
	require.Zero(t, checkKeyOrder(t, recs, map[string]int{"user-a": 2, "user-b": 1}))
}

// A relay whose lease ran out deletes nothing: the row is the new owner's,
// which publishes it again and deletes it.
func TestALateSettleOfALostLeaseDeletesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.insert(t, "user-late", 0, 0)
	store := outbox.NewStore(b.db.Pool)
	_, err := store.Claim(context.Background(), b.clock.Now(), 10, time.Minute, "late-relay")
	require.NoError(t, err)
	b.clock.Add(2 * time.Minute)
	taken, err := store.Claim(context.Background(), b.clock.Now(), 10, time.Minute, "survivor")
	require.NoError(t, err)
	require.Len(t, taken, 1)

	n, err := store.DeletePublished(context.Background(), []int64{id}, "late-relay")
	require.NoError(t, err)
	require.Zero(t, n)
	st, _ := b.status(t, id)
	require.Equal(t, "processing", st, "still the survivor's")
	n, err = store.DeletePublished(context.Background(), []int64{id}, "survivor")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}

// Rows an earlier relay marked processed (before the upgrade, or an old
// replica during a rolling deploy) are purged whatever their age; nothing
// unfinished or dead-lettered is touched.
func TestPurgeDeletesRowsAnEarlierRelayMarkedProcessed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r, _ := b.newRelay(t, relayOpts{})
	old := b.insert(t, "user-old", 1, 0)
	recent := b.insert(t, "user-recent", 1, 0)
	pending := b.insert(t, "user-pending", 1, 0)
	lettered := b.insert(t, "user-lettered", 1, 0)
	ctx := context.Background()
	_, err := b.db.Pool.Exec(ctx, `UPDATE transaction_outbox SET status = 'processed', finished_at = now() - interval '2 hours',
		processed_at = now() - interval '2 hours' WHERE id = $1`, old)
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, `UPDATE transaction_outbox SET status = 'processed', finished_at = now(), processed_at = now() WHERE id = $1`, recent)
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, `UPDATE transaction_outbox SET status = 'dlq', finished_at = now() WHERE id = $1`, lettered)
	require.NoError(t, err)

	n, err := r.Purge(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	rows, err := b.db.Pool.Query(ctx, `SELECT id FROM transaction_outbox ORDER BY id`)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Equal(t, []int64{pending, lettered}, left, "unpublished and dead-lettered rows are kept")
}

// flushWatch is the relay's client, counting the records handed to it while
// a flush was under way. With manual flushing (ClientOpts) a flush sends
// whatever is buffered, so a batch handed over during another batch's flush
// goes out record by record, and a record handed over after a failed
// request of its partition could start the producer's next epoch ahead of
// the failed one: the key-order defect ManualFlushing closes.
type flushWatch struct {
	relay.Producer
	flushing atomic.Int32
	during   atomic.Int32
}

func (w *flushWatch) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	if w.flushing.Load() > 0 {
		w.during.Add(1)
	}
	w.Producer.Produce(ctx, r, promise)
}

func (w *flushWatch) Flush(ctx context.Context) error {
	w.flushing.Add(1)
	defer w.flushing.Add(-1)
	return w.Producer.Flush(ctx)
}

// The relay's loops share one client (RELAY_WORKERS): a loop hands its batch
// over only while no other batch is being flushed, or the batch would not
// be buffered whole before it is sent.
func TestLoopsSharingTheClientNeverProduceDuringAnotherLoopsFlush(t *testing.T) {
	t.Parallel()
	b := setup(t)
	watch := &flushWatch{}
	r, _ := b.newRelay(t, relayOpts{batch: 20, wrap: func(p relay.Producer) relay.Producer {
		watch.Producer = p
		return watch
	}})
	const rows = 2000
	b.insertMany(t, rows, func(n int) string { return "key-" + strconv.Itoa(n%200) })
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	for range 2 {
		loops.Add(1)
		go func() {
			defer loops.Done()
			_ = r.Run(ctx)
		}()
	}
	require.Eventually(t, func() bool { return b.left(t) == 0 }, 60*time.Second, 20*time.Millisecond)
	cancel()
	loops.Wait()
	require.Zero(t, watch.during.Load(), "records handed to the client while another batch was being flushed")
}
