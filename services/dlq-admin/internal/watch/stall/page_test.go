package stall_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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

// pageSink is a webhook alert receiver counting pages by alert key.
type pageSink struct {
	mu    sync.Mutex
	pages map[string]int
}

func (s *pageSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Key string `json:"key"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.pages[body.Key]++
	s.mu.Unlock()
}

func (s *pageSink) count() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, n := range s.pages {
		out[k] = n
	}
	return out
}

// One stalled partition, seen by check after check while it stays stalled,
// pages once: the detector is the one owner of the partition-stalled alert
// (the payout worker only logs), and the alerter folds its repeats.
func TestOneStallPagesOnce(t *testing.T) {
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

	sink := &pageSink{pages: map[string]int{}}
	srv := httptest.NewServer(sink)
	t.Cleanup(srv.Close)
	c := &clock{t: time.Now()}
	reg := prometheus.NewRegistry()
	deps := lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registerer: reg, Clock: c.now}
	alerts, err := alert.New(alert.Config{Source: "dlq-admin", WebhookURL: srv.URL, Format: alert.FormatGeneric}, deps)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); alerts.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

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
	key := alert.PartitionStalledKey(group, topic, 0)
	// Every check raised its alert at once: all but the first were folded,
	// so one page was queued and nothing else is on its way.
	require.Equal(t, float64(stalledChecks-1), deliveries(t, reg, "suppressed"), "repeats folded")
	require.Eventually(t, func() bool { return deliveries(t, reg, "sent") == 1 }, 10*time.Second, 10*time.Millisecond, "no page for %s", key)
	require.Equal(t, map[string]int{key: 1}, sink.count())
}

// deliveries reads the alerter's aegis_alert_deliveries_total for result.
func deliveries(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "aegis_alert_deliveries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
