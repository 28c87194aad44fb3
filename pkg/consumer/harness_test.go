package consumer_test

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
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/consumer"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/panics"
)

const (
	group = "loop-test"
	topic = kafkax.TopicWebhookPending
)

// scripted is a handler whose answer per record key is a script: the n-th
// delivery of a key gets script[key](n). Keys without a script succeed.
type scripted struct {
	mu     sync.Mutex
	script map[string]func(n int) error
	// work is how long each record of a key takes; the handler gives up
	// with ctx's error when ctx ends first.
	work    map[string]time.Duration
	calls   map[string]int
	handled map[string]int
	order   []string
}

func newScripted(script map[string]func(int) error) *scripted {
	return &scripted{script: script, work: map[string]time.Duration{}, calls: map[string]int{}, handled: map[string]int{}}
}

func (s *scripted) handle(ctx context.Context, r *kgo.Record) error {
	k := string(r.Key)
	s.mu.Lock()
	s.calls[k]++
	n := s.calls[k]
	f, d := s.script[k], s.work[k]
	s.mu.Unlock()
	if d > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("working on %s: %w", k, ctx.Err())
		case <-time.After(d):
		}
	}
	if f != nil {
		if err := f(n); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.handled[k]++
	s.order = append(s.order, k)
	s.mu.Unlock()
	return nil
}

func (s *scripted) done(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handled[key] > 0
}

func (s *scripted) timesHandled(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handled[key]
}

func (s *scripted) attempts(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[key]
}

func (s *scripted) handledOrder() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order...)
}

type harness struct {
	kafka    *kfake.Cluster
	reg      *prometheus.Registry
	h        *scripted
	panics   *panics.Counter
	alerts   *alert.Alerter
	logger   *slog.Logger
	producer *kgo.Client
}

func newHarness(t *testing.T, script map[string]func(int) error) *harness {
	t.Helper()
	b := &harness{kafka: kafkatest.NewCluster(t), h: newScripted(script), reg: prometheus.NewRegistry(),
		logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	var err error
	b.alerts, err = alert.New(alert.Config{Source: "loop-test"}, lifecycle.Deps{Logger: b.logger, Registerer: b.reg, Clock: time.Now})
	require.NoError(t, err)
	b.panics = panics.NewCounter(b.reg)
	b.producer = kafkatest.NewClient(t, b.kafka, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	return b
}

// testConfig is cfg with the harness's group and short retries.
func testConfig(cfg consumer.Config) consumer.Config {
	cfg.Group = group
	if cfg.MaxPollRecords == 0 {
		cfg.MaxPollRecords = 50
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 4
	}
	if cfg.Grace == 0 {
		cfg.Grace = time.Second
	}
	cfg.Backoff = backoff.Policy{Base: 10 * time.Millisecond, Multiplier: 2, Max: 50 * time.Millisecond, MaxAttempts: 1}
	return cfg
}

// start runs a loop of the harness's group until the test ends or stop is
// called (stop returns once Run did). letters nil publishes dead letters to
// <topic>.dlq; none makes it have no dead-letter path.
func (b *harness) start(t *testing.T, cfg consumer.Config, letters consumer.DeadLetterer, none bool) (stop func()) {
	t.Helper()
	return b.startWith(t, cfg, letters, none, b.h.handle)
}

// startWith is start with handler h in place of the scripted one.
func (b *harness) startWith(t *testing.T, cfg consumer.Config, letters consumer.DeadLetterer, none bool, h consumer.Handler) (stop func()) {
	t.Helper()
	cfg = testConfig(cfg)
	// Frequent heartbeats: a member learns of a rebalance within the test.
	cl := kafkatest.NewClient(t, b.kafka, append(consumer.ClientOpts(cfg.Group, kafkax.Membership{}, topic),
		kgo.HeartbeatInterval(100*time.Millisecond))...)
	if letters == nil && !none {
		w, err := dlq.NewWriter("loop-test", lifecycle.Deps{Logger: b.logger, Registerer: b.reg})
		require.NoError(t, err)
		letters = consumer.Publish{Client: cl, Group: cfg.Group, Writer: w}
	}
	c, err := consumer.New(cl, h, cfg, consumer.Deps{
		Deps: lifecycle.Deps{Logger: b.logger, Registerer: b.reg, Panics: b.panics}, Alerts: b.alerts, DeadLetters: letters})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); require.NoError(t, <-done) }) }
	t.Cleanup(stop)
	return stop
}

// produce writes a record keyed key to partition p of the topic.
func (b *harness) produce(t *testing.T, p int32, key string) {
	t.Helper()
	rec := &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: []byte(`{"k":"` + key + `"}`),
		Headers: []kgo.RecordHeader{{Key: kafkax.HeaderMessageID, Value: []byte("msg-" + key)}}}
	require.NoError(t, b.producer.ProduceSync(context.Background(), rec).FirstErr())
}

func (b *harness) waitDone(t *testing.T, keys ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, k := range keys {
			if !b.h.done(k) {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "records %v never handled", keys)
}

func (b *harness) deadLetters(t *testing.T, n int) []dlq.Letter {
	t.Helper()
	recs := kafkatest.ReadAll(t, b.kafka, kafkax.DLQTopic(topic), n, 10*time.Second)
	require.Len(t, recs, n)
	var out []dlq.Letter
	for _, r := range recs {
		l, problems := dlq.FromRecord(r)
		require.Empty(t, problems)
		out = append(out, l)
	}
	return out
}

// committed is the group's committed offset on partition p (0: none).
func (b *harness) committed(t *testing.T, p int32) int64 {
	t.Helper()
	offsets, err := kadm.NewClient(kafkatest.NewClient(t, b.kafka)).FetchOffsets(context.Background(), group)
	require.NoError(t, err)
	o, ok := offsets.Lookup(topic, p)
	if !ok {
		return 0
	}
	return o.At
}

var others = []string{"k1", "k2", "k3", "k4", "k5", "k6"}

// counting is a slog handler that counts records by message.
type counting struct {
	mu   sync.Mutex
	msgs map[string]int
}

func (c *counting) Enabled(context.Context, slog.Level) bool { return true }

func (c *counting) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.msgs == nil {
		c.msgs = map[string]int{}
	}
	c.msgs[r.Message]++
	return nil
}

func (c *counting) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *counting) WithGroup(string) slog.Handler      { return c }

func (c *counting) count(msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.msgs[msg]
}

// onQueued is a Config.OnQueued that reports the key of each record queued
// behind another in flight on queued.
func onQueued(queued chan<- string) func(*kgo.Record) {
	return func(r *kgo.Record) {
		select {
		case queued <- string(r.Key):
		default:
		}
	}
}

// waitQueued waits until the loop polled a record of key and queued it
// behind the record of its key (PerPartition: partition) in flight: from
// then on only that record finishing may start it.
func waitQueued(t *testing.T, queued <-chan string, key string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case k := <-queued:
			if k == key {
				return
			}
		case <-timeout:
			t.Fatalf("no record of %s was queued behind the one in flight", key)
		}
	}
}
