package intake_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/panics"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/intake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const group = "dlq-admin-test"

// waitFor bounds every wait on the consumer; none of them is a timing
// assertion, only a guard against hanging.
const waitFor = 30 * time.Second

type running struct {
	reg  *prometheus.Registry
	stop func() error // cancels Run, waits for it, closes the consumer
}

// start runs a consumer on cluster with pool until stop is called (or the
// test ends).
func start(t testing.TB, cluster *kfake.Cluster, pool *pgxpool.Pool) running {
	t.Helper()
	return startWith(t, cluster, pool, intake.Config{}, nil)
}

func startWith(t testing.TB, cluster *kfake.Cluster, pool *pgxpool.Pool, cfg intake.Config, counter *panics.Counter) running {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Brokers, cfg.Group = cluster.ListenAddrs(), group
	cfg.Backoff = backoff.Policy{Base: 10 * time.Millisecond, Multiplier: 2, Max: 50 * time.Millisecond, MaxAttempts: 1}
	c, err := intake.New(cfg, pool, lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registerer: reg, Panics: counter})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		err := <-done
		c.Close()
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return running{reg: reg, stop: stop}
}

func produce(t *testing.T, cluster *kfake.Cluster, records ...*kgo.Record) {
	t.Helper()
	cl := kafkatest.NewClient(t, cluster)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, records...).FirstErr())
}

func consumerLetter() dlq.Letter {
	p, o := int32(2), int64(41)
	at := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	return dlq.Letter{
		Source: dlq.SourceConsumer, OriginalTopic: kafkax.TopicTransactions,
		OriginalPartition: &p, OriginalOffset: &o, ConsumerGroup: "payout-worker",
		PartitionKey: "user-1", EventType: "payout.requested", Payload: []byte(`{"payout_id":"p1"}`),
		Headers: map[string]string{"correlation_id": "corr-1"}, Error: "psp rejected: account_invalid",
		ErrorClass: "permanent", RetryCount: 2, RetryHistory: []dlq.Attempt{{At: at, Error: "timeout", Class: "transient"}},
		FirstFailureAt: at, FailedAt: at.Add(time.Minute), CorrelationID: "corr-1",
	}
}

func record(t *testing.T, l dlq.Letter) *kgo.Record {
	t.Helper()
	r, err := l.Record()
	require.NoError(t, err)
	return r
}

func rows(t testing.TB, db *pgtest.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM dead_letters").Scan(&n))
	return n
}

func waitForRows(t *testing.T, db *pgtest.DB, want int) {
	t.Helper()
	require.Eventually(t, func() bool { return rows(t, db) >= want }, waitFor, 10*time.Millisecond)
	require.Equal(t, want, rows(t, db))
}

// committed returns the group's committed offset per topic/partition.
func committed(t *testing.T, cluster *kfake.Cluster) map[string]map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(kafkatest.NewClient(t, cluster))
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, group)
	require.NoError(t, err)
	out := map[string]map[int32]int64{}
	for topic, ps := range offs {
		for p, o := range ps {
			require.NoError(t, o.Err)
			if o.At < 0 {
				continue
			}
			if out[topic] == nil {
				out[topic] = map[int32]int64{}
			}
			out[topic][p] = o.At
		}
	}
	return out
}

// ends returns the end offset of every non-empty partition of the DLQ topics.
func ends(t *testing.T, cluster *kfake.Cluster) map[string]map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(kafkatest.NewClient(t, cluster))
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	listed, err := adm.ListEndOffsets(ctx, intake.Topics()...)
	require.NoError(t, err)
	out := map[string]map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		require.NoError(t, o.Err)
		if o.Offset > 0 {
			if out[o.Topic] == nil {
				out[o.Topic] = map[int32]int64{}
			}
			out[o.Topic][o.Partition] = o.Offset
		}
	})
	return out
}

func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metric
				}
			}
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

func TestConsumerStoresEachLetterOnceAndCommits(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.NewCluster(t)
	db := pgtest.New(t)

	letter := consumerLetter()
	outboxID := int64(99)
	relay := dlq.Letter{Source: dlq.SourceRelay, OriginalTopic: kafkax.TopicWebhookPending, OutboxID: &outboxID,
		Payload: []byte(`{"event_id":"evt_1"}`), Error: "kafka unreachable", ErrorClass: "transient", RetryCount: 6,
		FirstFailureAt: time.Now(), FailedAt: time.Now()}
	garbage := &kgo.Record{Topic: kafkax.DLQTopic(kafkax.TopicSettlements), Value: []byte("not json at all"),
		Headers: []kgo.RecordHeader{
			{Key: dlq.HeaderOriginalPartition, Value: []byte("-1")},
			{Key: dlq.HeaderOriginalOffset, Value: []byte("NaN")},
			{Key: dlq.HeaderRetryCount, Value: []byte("99999999999")},
			{Key: dlq.HeaderRetryHistory, Value: []byte("{broken")},
			{Key: dlq.HeaderSource, Value: []byte("martian")},
			{Key: dlq.HeaderError, Value: []byte("bad\x00bytes\xff")},
			{Key: "trace\x00id", Value: []byte{0xfe, 'x'}},
		}}
	// The same dead letter twice (a producer retry, a redelivery), a relay
	// letter and a record nobody could parse.
	produce(t, cluster, record(t, letter), record(t, letter), record(t, relay), garbage)

	c := start(t, cluster, db.Pool)
	waitForRows(t, db, 3)
	// Three rows can be there before the duplicate is handled (it is on the
	// first letter's partition, after it): wait for all four records, or a
	// stop now would rightly leave the duplicate uncommitted.
	require.Eventually(t, func() bool {
		return counter(t, c.reg, "aegis_dlq_ingested_total", nil) == 4
	}, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, c.stop())

	// Everything consumed is committed: a member of the group starting now
	// has nothing left to read.
	want := ends(t, cluster)
	require.Len(t, want, 3, "records landed on three topics")
	require.Equal(t, want, committed(t, cluster))
	require.Equal(t, 3, rows(t, db), "the duplicate was not stored")

	var p *int32
	var o *int64
	var errText, source string
	var retryCount int
	var payload []byte
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT original_partition, original_offset, error, source, retry_count, payload
		FROM dead_letters WHERE original_topic = $1`, kafkax.TopicSettlements).Scan(&p, &o, &errText, &source, &retryCount, &payload))
	require.Nil(t, p, "an unreadable origin is left empty, never made up")
	require.Nil(t, o)
	require.Contains(t, errText, "malformed")
	require.Contains(t, errText, "original_offset")
	require.Equal(t, dlq.SourceConsumer, source)
	require.Zero(t, retryCount)
	require.Equal(t, "not json at all", string(payload), "the payload is stored as it came")

	require.Equal(t, 3.0, counter(t, c.reg, "aegis_dlq_ingested_total", map[string]string{"result": "stored"}))
	require.Equal(t, 1.0, counter(t, c.reg, "aegis_dlq_ingested_total",
		map[string]string{"result": "duplicate", "topic": "aegis.transactions.dlq"}))
	require.Equal(t, 1.0, counter(t, c.reg, "aegis_dlq_ingested_malformed_total", nil))

	// A later member of the group reads only what came after the commit: one
	// more copy of the letter, which it recognises as a duplicate.
	produce(t, cluster, record(t, letter))
	c2 := start(t, cluster, db.Pool)
	require.Eventually(t, func() bool {
		return counter(t, c2.reg, "aegis_dlq_ingested_total", nil) >= 1
	}, waitFor, 10*time.Millisecond)
	require.NoError(t, c2.stop())
	require.Equal(t, 1.0, counter(t, c2.reg, "aegis_dlq_ingested_total", map[string]string{"result": "duplicate"}))
	require.Zero(t, counter(t, c2.reg, "aegis_dlq_ingested_total", map[string]string{"result": "stored"}))
	require.Equal(t, 3, rows(t, db))
	require.Equal(t, ends(t, cluster), committed(t, cluster))
}

func TestConsumerDoesNotCommitWhilePostgresFails(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.NewCluster(t)
	db := pgtest.New(t)

	u, err := url.Parse(db.URL)
	require.NoError(t, err)
	u.Path = fmt.Sprintf("/%s_does_not_exist", db.Name)
	broken, err := pgxpool.New(context.Background(), u.String())
	require.NoError(t, err)
	t.Cleanup(broken.Close)

	produce(t, cluster, record(t, consumerLetter()))
	c := start(t, cluster, broken)
	require.Eventually(t, func() bool {
		return counter(t, c.reg, "aegis_consumer_messages_total", map[string]string{"outcome": "transient"}) >= 3
	}, waitFor, 10*time.Millisecond, "the batch is retried")
	require.NoError(t, c.stop())
	require.Empty(t, committed(t, cluster), "nothing is committed while nothing is stored")
	require.Zero(t, counter(t, c.reg, "aegis_dlq_ingested_total", nil))

	// The record was not lost: once Postgres answers, it is stored.
	good := start(t, cluster, db.Pool)
	waitForRows(t, db, 1)
	require.NoError(t, good.stop())
	require.Equal(t, ends(t, cluster), committed(t, cluster))
}
