package stall_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/watch/stall"
)

type raised struct {
	mu     sync.Mutex
	alerts []alert.Alert
}

func (r *raised) Raise(_ context.Context, a alert.Alert) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.alerts = append(r.alerts, a)
}

func (r *raised) all() []alert.Alert {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]alert.Alert(nil), r.alerts...)
}

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// A live member that handled one record, committed it and then stopped
// making progress (as a worker retrying a poison record in place did) is
// reported once STALL_AFTER passed without its commit moving, by group,
// partition and member; when it commits again the stall clears.
func TestAPartitionWithLagAndNoProgressIsReportedWithItsMember(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.NewCluster(t)
	const group = "payout-worker"
	topic := kafkax.TopicWebhookPending
	producer := kafkatest.NewClient(t, cluster, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 5 {
		require.NoError(t, producer.ProduceSync(context.Background(), &kgo.Record{Partition: 1, Value: []byte{byte(i)}}).FirstErr())
	}
	worker := kafkatest.NewClient(t, cluster, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ClientID("payout-worker-test"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var recs []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(recs) < 5 && ctx.Err() == nil {
		worker.PollFetches(ctx).EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	require.Len(t, recs, 5)
	require.NoError(t, worker.CommitRecords(ctx, recs[0]))

	c := &clock{t: time.Now()}
	r := &raised{}
	reg := prometheus.NewRegistry()
	d, err := stall.New(stall.Config{Groups: []string{group}, After: time.Minute, Interval: time.Second},
		kadm.NewClient(kafkatest.NewClient(t, cluster)), r, lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registerer: reg, Clock: c.now})
	require.NoError(t, err)

	got, err := d.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, got, "lag alone is not a stall")
	c.add(30 * time.Second)
	got, err = d.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, got)

	c.add(31 * time.Second)
	got, err = d.Check(ctx)
	require.NoError(t, err)
	require.Len(t, got, 1)
	s := got[0]
	require.Equal(t, group, s.Group)
	require.Equal(t, topic, s.Topic)
	require.EqualValues(t, 1, s.Partition)
	require.EqualValues(t, 4, s.Lag)
	require.Contains(t, s.Member, "payout-worker-test", "the member is named by its client id")
	alerts := r.all()
	require.Len(t, alerts, 1)
	require.Equal(t, "consumer_stalled:payout-worker:aegis.webhook.pending:1", alerts[0].Key)
	require.Equal(t, alert.Critical, alerts[0].Severity)
	require.True(t, strings.Contains(alerts[0].Summary, "partition 1"))
	require.Equal(t, 1.0, gauge(t, reg, "aegis_consumer_group_stalled", group, topic, "1"))
	require.Equal(t, 4.0, gauge(t, reg, "aegis_consumer_group_lag", group, topic, "1"))

	// Progress: the commit moves, the stall clears at once.
	require.NoError(t, worker.CommitRecords(ctx, recs[4]))
	got, err = d.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
	require.Equal(t, 0.0, gauge(t, reg, "aegis_consumer_group_stalled", group, topic, "1"))
}

// A group nobody consumes (every member gone, or ghosts the broker dropped)
// with lag is a stall too; its member is "none".
func TestAGroupWithoutMembersAndWithLagIsStalled(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.NewCluster(t)
	const group = "dlq-admin"
	topic := kafkax.TopicOutboxDLQ
	producer := kafkatest.NewClient(t, cluster, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 3 {
		require.NoError(t, producer.ProduceSync(context.Background(), &kgo.Record{Partition: 0, Value: []byte{byte(i)}}).FirstErr())
	}
	adm := kadm.NewClient(kafkatest.NewClient(t, cluster))
	_, err := adm.CommitOffsets(context.Background(), group, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 0}))
	require.NoError(t, err)

	c := &clock{t: time.Now()}
	d, err := stall.New(stall.Config{Groups: []string{group}, After: time.Minute, Interval: time.Second},
		adm, &raised{}, lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registerer: prometheus.NewRegistry(), Clock: c.now})
	require.NoError(t, err)
	_, err = d.Check(context.Background())
	require.NoError(t, err)
	c.add(2 * time.Minute)
	got, err := d.Check(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "none", got[0].Member)
	require.EqualValues(t, 2, got[0].Lag)
}

func gauge(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var have []string
			for _, l := range m.GetLabel() {
				have = append(have, l.GetValue())
			}
			// labels are sorted by name: group, partition, topic
			if len(have) == 3 && have[0] == labels[0] && have[1] == labels[2] && have[2] == labels[1] {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}
