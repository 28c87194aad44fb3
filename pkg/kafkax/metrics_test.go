package kafkax_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// sample sums the series of metric name whose labels include want: a
// counter's value or a histogram's count. found is false when none matched.
func sample(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) (v float64, found bool) {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, w := range want {
				if labels[k] != w {
					continue series
				}
			}
			found = true
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				v += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v += m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				require.NotEmpty(t, m.GetHistogram().GetBucket(), "%s: classic buckets", name)
				v += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return v, found
}

// Each client's franz-go metrics (kprom) land on the service's registry as
// aegis_kafka_*, told apart by the client label: records and bytes produced
// and fetched per topic, request round trips, connection errors.
func TestClientMetricsOnAKfakeCluster(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	defer c.Close()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	reg := prometheus.NewPedanticRegistry()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	prod, err := kafkax.NewClient(c.ListenAddrs(), logger, kafkax.Metrics(reg, "relay", logger))
	require.NoError(t, err)
	defer prod.Close()
	require.NoError(t, kafkax.EnsureTopics(ctx, prod, 1, "metrics.topic"))
	for _, v := range []string{"a", "bb", "ccc"} {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: "metrics.topic", Value: []byte(v)}).FirstErr())
	}

	cons, err := kafkax.NewClient(c.ListenAddrs(), logger, kafkax.Metrics(reg, "consumer", logger),
		kgo.ConsumeTopics("metrics.topic"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cons.Close()
	got := 0
	for got < 3 {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "fetched %d of 3", got)
		fs.EachRecord(func(*kgo.Record) { got++ })
	}

	relay := map[string]string{"client": "relay", "topic": "metrics.topic"}
	v, _ := sample(t, reg, "aegis_kafka_produce_records_total", relay)
	require.EqualValues(t, 3, v)
	v, _ = sample(t, reg, "aegis_kafka_produce_bytes_total", relay)
	require.Positive(t, v)
	v, _ = sample(t, reg, "aegis_kafka_fetch_records_total", map[string]string{"client": "consumer", "topic": "metrics.topic"})
	require.EqualValues(t, 3, v)
	_, found := sample(t, reg, "aegis_kafka_fetch_records_total", map[string]string{"client": "relay"})
	require.False(t, found, "the producer fetched nothing")
	for _, client := range []string{"relay", "consumer"} {
		v, _ = sample(t, reg, "aegis_kafka_request_duration_e2e_seconds", map[string]string{"client": client})
		require.Positive(t, v, "%s: request round trips", client)
		v, _ = sample(t, reg, "aegis_kafka_write_bytes_total", map[string]string{"client": client})
		require.Positive(t, v, client)
	}

	// A client that cannot reach its broker counts connection errors.
	dead, err := kafkax.NewClient([]string{"127.0.0.1:1"}, logger, kafkax.Metrics(reg, "dead", logger),
		kgo.RetryTimeout(200*time.Millisecond))
	require.NoError(t, err)
	pingCtx, cancelPing := context.WithTimeout(ctx, time.Second)
	require.Error(t, dead.Ping(pingCtx))
	cancelPing()
	v, _ = sample(t, reg, "aegis_kafka_connect_errors_total", map[string]string{"client": "dead"})
	require.Positive(t, v)

	// A client name given twice on one registry: the second client runs
	// without metrics and says so, nothing panics.
	twice, err := kafkax.NewClient(c.ListenAddrs(), logger, kafkax.Metrics(reg, "relay", logger))
	require.NoError(t, err)
	require.NoError(t, twice.Ping(ctx))
	twice.Close()
	require.Contains(t, logs.String(), "kafka client metric not registered")
	v, _ = sample(t, reg, "aegis_kafka_produce_records_total", relay)
	require.EqualValues(t, 3, v, "closing the refused client keeps the first one's metrics")

	// Closing a client takes its metrics away.
	dead.Close()
	_, found = sample(t, reg, "aegis_kafka_connect_errors_total", map[string]string{"client": "dead"})
	require.False(t, found)
}
