package stall_test

import (
	"context"
	"io"
	"log/slog"
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

// One stalled partition, seen by check after check while it stays stalled,
// is one condition: the one series aegis_consumer_group_stalled{group,
// topic, partition} = 1 that AegisConsumerStalled pages on (one alert in
// Alertmanager however many checks see it), and it goes back to 0, so the
// page resolves, once the group commits past the stuck record. The
// detector is the one owner of the partition-stalled alert (the payout
// worker only logs).
func TestOneStallIsOneConditionThatResolves(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.NewCluster(t)
	const group = "payout-worker"
	topic := kafkax.TopicTransactions
	producer := kafkatest.NewClient(t, cluster, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 3 {
		require.NoError(t, producer.ProduceSync(context.Background(), &kgo.Record{Partition: 0, Value: []byte{byte(i)}}).FirstErr())
	}
	adm := kadm.NewClient(kafkatest.NewClient(t, cluster))
	_, err := adm.CommitOffsets(context.Background(), group, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 0}))
	require.NoError(t, err)

	c := &clock{t: time.Now()}
	reg := prometheus.NewRegistry()
	deps := lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registerer: reg, Clock: c.now}
	alerts, err := alert.New(alert.Config{Source: "dlq-admin"}, deps)
	require.NoError(t, err)
	ctx := context.Background()

	d, err := stall.New(stall.Config{Groups: []string{group}, After: time.Minute, Interval: 15 * time.Second}, adm, alerts, deps)
	require.NoError(t, err)
	stalledChecks := 0
	for range 12 { // three minutes of checks, every STALL_CHECK_INTERVAL
		got, err := d.Check(ctx)
		require.NoError(t, err)
		stalledChecks += len(got)
		c.add(15 * time.Second)
	}
	require.Greater(t, stalledChecks, 1, "the stall was seen by more than one check")
	require.Equal(t, map[string]float64{"payout-worker/aegis.transactions/0": 1}, firing(stalledSeries(t, reg)),
		"one stalled partition is one series at 1: one alert")
	require.Equal(t, float64(stalledChecks), alertsRaised(t, reg, alert.KindConsumerStalled),
		"each check that saw it logged its ALERT line")

	// The group commits past the stuck records: the condition clears.
	_, err = adm.CommitOffsets(ctx, group, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 2}))
	require.NoError(t, err)
	_, err = d.Check(ctx)
	require.NoError(t, err)
	series := stalledSeries(t, reg)
	require.Contains(t, series, "payout-worker/aegis.transactions/0", "the series stays, at 0")
	require.Empty(t, firing(series), "resolved")
}

// stalledSeries reads aegis_consumer_group_stalled as group/topic/partition
// → value.
func stalledSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "aegis_consumer_group_stalled" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out[l["group"]+"/"+l["topic"]+"/"+l["partition"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

// firing is the series of m at 1.
func firing(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if v == 1 {
			out[k] = v
		}
	}
	return out
}

// alertsRaised reads aegis_alerts_total for a kind of key.
func alertsRaised(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "aegis_alerts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
