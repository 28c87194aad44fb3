package depth_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/watch/depth"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var now = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// raised records alerts: a hand-written depth.Raiser.
type raised struct {
	mu     sync.Mutex
	alerts []alert.Alert
}

func (r *raised) Raise(_ context.Context, a alert.Alert) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.alerts = append(r.alerts, a)
}

func (r *raised) got() []alert.Alert {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]alert.Alert(nil), r.alerts...)
}

type bundle struct {
	db  *pgtest.DB
	mon *depth.Monitor
	reg *prometheus.Registry
	rec *raised
	n   int64
}

func setup(t *testing.T, cfg depth.Config) *bundle {
	t.Helper()
	db := pgtest.New(t)
	reg := prometheus.NewRegistry()
	rec := &raised{}
	mon, err := depth.New(cfg, store.New(db.Pool), rec, lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registerer: reg, Clock: func() time.Time { return now }})
	require.NoError(t, err)
	return &bundle{db: db, mon: mon, reg: reg, rec: rec}
}

func (b *bundle) letter(t *testing.T, source, topic, class string, failedAt time.Time) int64 {
	t.Helper()
	b.n++
	l := dlq.Letter{Source: source, OriginalTopic: topic, PartitionKey: "alice", Payload: []byte(`{"card":{"number":"4242424242424242"}}`),
		Headers: map[string]string{"authorization": "Bearer sk_live_secret"},
		Error:   "boom", ErrorClass: class, FirstFailureAt: failedAt, FailedAt: failedAt, CorrelationID: fmt.Sprintf("corr-%d", b.n)}
	switch source {
	case dlq.SourceConsumer:
		p, o := int32(0), b.n
		l.OriginalPartition, l.OriginalOffset = &p, &o
	case dlq.SourceRelay:
		id := b.n
		l.OutboxID = &id
	}
	id, ok, err := dlq.Insert(context.Background(), b.db.Pool, l)
	require.NoError(t, err)
	require.True(t, ok)
	return id
}

func TestEveryNewLetterAlertsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, depth.Config{})
	ctx := context.Background()
	c := b.letter(t, dlq.SourceConsumer, kafkax.TopicTransactions, "permanent", now)
	r := b.letter(t, dlq.SourceRelay, kafkax.TopicWebhookPending, "transient", now) // written by the relay itself
	i := b.letter(t, dlq.SourceIngest, kafkax.TopicWebhookPending, "permanent", now)

	n, err := b.mon.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	got := b.rec.got()
	require.Len(t, got, 3)
	require.Equal(t, "dead_letter:aegis.transactions:permanent", got[0].Key)
	require.Equal(t, alert.Error, got[0].Severity)
	require.Equal(t, map[string]any{"dead_letter_id": c, "topic": kafkax.TopicTransactions, "error_class": "permanent",
		"error": "boom", "correlation_id": "corr-1", "source": dlq.SourceConsumer}, got[0].Details)
	require.Equal(t, "dead_letter:aegis.webhook.pending:transient", got[1].Key)
	require.Equal(t, r, got[1].Details["dead_letter_id"])
	require.Equal(t, i, got[2].Details["dead_letter_id"])
	for _, a := range got {
		text := fmt.Sprint(a)
		require.NotContains(t, text, "4242424242424242", "alerts never carry payloads")
		require.NotContains(t, text, "sk_live_secret", "nor headers")
	}

	n, err = b.mon.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "each letter alerts once")
	require.Len(t, b.rec.got(), 3)
}

func TestConcurrentSweepsNeverAlertTwice(t *testing.T) {
	t.Parallel()
	b := setup(t, depth.Config{})
	for range 40 {
		b.letter(t, dlq.SourceConsumer, kafkax.TopicTransactions, "permanent", now)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.mon.Sweep(context.Background())
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	_, err := b.mon.Sweep(context.Background())
	require.NoError(t, err)
	seen := map[any]bool{}
	for _, a := range b.rec.got() {
		id := a.Details["dead_letter_id"]
		require.False(t, seen[id], "letter %v alerted twice", id)
		seen[id] = true
	}
	require.Len(t, seen, 40)
}

func TestNotifyWakesTheSweep(t *testing.T) {
	t.Parallel()
	// Intervals long enough that only Notify can explain the alert.
	b := setup(t, depth.Config{CheckInterval: time.Hour, SweepInterval: time.Hour})
	b.letter(t, dlq.SourceConsumer, kafkax.TopicSettlements, "permanent", now)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.mon.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	// Run sweeps once at start; after that only Notify sweeps again.
	require.Eventually(t, func() bool { return len(b.rec.got()) == 1 }, 30*time.Second, 5*time.Millisecond)
	b.letter(t, dlq.SourceConsumer, kafkax.TopicSettlements, "permanent", now)
	b.mon.Notify()
	require.Eventually(t, func() bool { return len(b.rec.got()) == 2 }, 30*time.Second, 5*time.Millisecond)
}

func TestCheckSetsGaugesAndAlertsOnDepth(t *testing.T) {
	t.Parallel()
	b := setup(t, depth.Config{DepthThreshold: 2})
	ctx := context.Background()
	for i := range 3 {
		b.letter(t, dlq.SourceConsumer, kafkax.TopicTransactions, "transient", now.Add(-time.Duration(i+1)*time.Hour))
	}
	b.letter(t, dlq.SourceConsumer, kafkax.TopicSettlements, "permanent", now.Add(-time.Minute))
	discarded := b.letter(t, dlq.SourceConsumer, kafkax.TopicSettlements, "permanent", now.Add(-5*time.Hour))
	_, err := b.db.Pool.Exec(ctx, `UPDATE dead_letters SET status = 'discarded', resolved_at = now(), resolved_by = 'ops' WHERE id = $1`, discarded)
	require.NoError(t, err)

	require.NoError(t, b.mon.Check(ctx))
	depth := gauge(t, b.reg, "aegis_dlq_depth")
	require.Equal(t, 3.0, depth["status=open,topic=aegis.transactions"])
	require.Equal(t, 0.0, depth["status=replayed,topic=aegis.transactions"])
	require.Equal(t, 1.0, depth["status=open,topic=aegis.settlements"])
	require.Equal(t, 1.0, depth["status=discarded,topic=aegis.settlements"])
	age := gauge(t, b.reg, "aegis_dlq_oldest_open_age_seconds")
	require.Equal(t, 3*3600.0, age["topic=aegis.transactions"])
	require.Equal(t, 60.0, age["topic=aegis.settlements"], "the discarded letter is older but not open")

	got := b.rec.got()
	require.Len(t, got, 1, "only aegis.transactions is over the threshold")
	require.Equal(t, "dlq_depth:aegis.transactions", got[0].Key)
	require.Equal(t, alert.Warning, got[0].Severity)
	require.Equal(t, int64(3), got[0].Details["open"])
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	require.Error(t, depth.Config{CheckInterval: -time.Second, SweepInterval: time.Second, DepthThreshold: 1}.Validate())
	require.Error(t, depth.Config{CheckInterval: time.Second, SweepInterval: time.Second, DepthThreshold: 0}.Validate())
}

// gauge reads a gauge family as "label=value,..." (labels sorted by name,
// as Prometheus keeps them) → value; nil when it has no series yet.
func gauge(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		out := map[string]float64{}
		for _, m := range f.GetMetric() {
			key := ""
			for i, l := range m.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += l.GetName() + "=" + l.GetValue()
			}
			out[key] = m.GetGauge().GetValue()
		}
		return out
	}
	return nil
}

// Open letters are a gauge by topic and class, the condition
// AegisDeadLetterOpen pages on: it resolves when the letters are replayed or
// discarded (the series goes to 0, it does not vanish).
func TestOpenLettersGaugeByTopicAndClass(t *testing.T) {
	t.Parallel()
	b := setup(t, depth.Config{})
	ctx := context.Background()
	b.letter(t, dlq.SourceConsumer, kafkax.TopicTransactions, "permanent", now)
	b.letter(t, dlq.SourceConsumer, kafkax.TopicTransactions, "permanent", now)
	proof := b.letter(t, dlq.SourceConsumer, kafkax.TopicTransactions, alert.UnprovenEventClass, now)
	b.letter(t, dlq.SourceRelay, kafkax.TopicSettlements, "transient", now)

	require.NoError(t, b.mon.Check(ctx))
	require.Equal(t, map[string]float64{
		"class=permanent,topic=aegis.transactions":      2,
		"class=unproven_event,topic=aegis.transactions": 1,
		"class=transient,topic=aegis.settlements":       1,
	}, gauge(t, b.reg, depth.MetricOpenLetters))

	_, err := b.db.Pool.Exec(ctx, `UPDATE dead_letters SET status = 'discarded', resolved_at = now(), resolved_by = 'ops' WHERE id = $1`, proof)
	require.NoError(t, err)
	require.NoError(t, b.mon.Check(ctx))
	require.Equal(t, 0.0, gauge(t, b.reg, depth.MetricOpenLetters)["class=unproven_event,topic=aegis.transactions"],
		"resolved: the series is 0, not gone")
	require.Equal(t, 2.0, gauge(t, b.reg, depth.MetricOpenLetters)["class=permanent,topic=aegis.transactions"])
}
