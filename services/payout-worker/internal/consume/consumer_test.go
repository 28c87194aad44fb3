package consume_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/panics"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/consume"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox"
)

// scripted is a handler whose answer per message key is a script: the
// n-th delivery of a key gets script[key](n). Keys without a script succeed.
type scripted struct {
	mu      sync.Mutex
	script  map[string]func(n int) error
	calls   map[string]int
	handled map[string]bool
}

func (s *scripted) Handle(_ context.Context, m inbox.Message) error {
	s.mu.Lock()
	k := string(m.Key)
	s.calls[k]++
	n := s.calls[k]
	f := s.script[k]
	s.mu.Unlock()
	if f != nil {
		if err := f(n); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.handled[k] = true
	s.mu.Unlock()
	return nil
}

func (s *scripted) done(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handled[key]
}

func (s *scripted) attempts(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[key]
}

type bundle struct {
	kafka   *kfake.Cluster
	reg     *prometheus.Registry
	h       *scripted
	panics  *panics.Counter
	produce func(key string)
}

func setup(t *testing.T, cfg consume.Config, script map[string]func(int) error) *bundle {
	t.Helper()
	b := &bundle{kafka: kafkatest.NewCluster(t), h: &scripted{script: script, calls: map[string]int{}, handled: map[string]bool{}}}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	b.reg = reg
	alerts, err := alert.New(alert.Config{Source: "payout-worker"}, lifecycle.Deps{Logger: logger, Registerer: reg, Clock: time.Now})
	require.NoError(t, err)
	b.panics = panics.NewCounter(reg)
	cfg.Group = "payout-worker"
	cfg.MaxPollRecords = 50
	cfg.Concurrency = 4
	cfg.Grace = time.Second
	cfg.InfraBackoff = backoff.Policy{Base: 10 * time.Millisecond, Multiplier: 2, Max: 50 * time.Millisecond, MaxAttempts: 1}
	cl := kafkatest.NewClient(t, b.kafka, consume.ClientOpts(cfg.Group, kafkax.Membership{}, kafkax.TopicWebhookPending)...)
	c, err := consume.New(cl, b.h, cfg, consume.Deps{Deps: lifecycle.Deps{Logger: logger, Registerer: reg, Panics: b.panics}, Alerts: alerts})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	producer := kafkatest.NewClient(t, b.kafka)
	b.produce = func(key string) {
		t.Helper()
		rec := &kgo.Record{Topic: kafkax.TopicWebhookPending, Key: []byte(key), Value: []byte(`{"k":"` + key + `"}`),
			Headers: []kgo.RecordHeader{{Key: kafkax.HeaderMessageID, Value: []byte("msg-" + key)}}}
		require.NoError(t, producer.ProduceSync(context.Background(), rec).FirstErr())
	}
	return b
}

func (b *bundle) waitDone(t *testing.T, keys ...string) {
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

func (b *bundle) deadLetters(t *testing.T, n int) []dlq.Letter {
	t.Helper()
	recs := kafkatest.ReadAll(t, b.kafka, kafkax.DLQTopic(kafkax.TopicWebhookPending), n, 10*time.Second)
	require.Len(t, recs, n)
	var out []dlq.Letter
	for _, r := range recs {
		l, problems := dlq.FromRecord(r)
		require.Empty(t, problems)
		out = append(out, l)
	}
	return out
}

var others = []string{"k1", "k2", "k3", "k4", "k5", "k6"}

func TestTransientFailuresAreBoundedThenDeadLettered(t *testing.T) {
	t.Parallel()
	b := setup(t, consume.Config{RetryInPlaceAttempts: 4, RetryInPlaceFor: time.Minute}, map[string]func(int) error{
		"down": func(int) error {
			return &pgconn.PgError{Code: database.CodeConnectionFailure, Message: "connection failure"}
		},
		"blip": func(n int) error {
			return map[bool]error{true: &pgconn.PgError{Code: database.CodeSerializationFailure, Message: "serialization"}}[n < 3]
		},
		"weird": func(int) error { return errors.New("an unclassified error") },
	})
	for _, k := range append([]string{"down", "blip", "weird"}, others...) {
		b.produce(k)
	}
	b.waitDone(t, append([]string{"blip"}, others...)...)
	require.Equal(t, 3, b.h.attempts("blip"), "a transient failure that clears is retried in place until it does")
	letters := b.deadLetters(t, 2)
	byKey := map[string]dlq.Letter{}
	for _, l := range letters {
		byKey[l.PartitionKey] = l
	}
	for _, k := range []string{"down", "weird"} {
		l := byKey[k]
		require.Equal(t, "transient", l.ErrorClass, k)
		require.Equal(t, 4, l.RetryCount, k)
		require.Len(t, l.RetryHistory, 4, k)
		require.Contains(t, l.Error, "still failing after 4 in-place attempts", k)
		require.Equal(t, 4, b.h.attempts(k), k)
	}
}

func TestTransientRetriesStopAfterRetryInPlaceFor(t *testing.T) {
	t.Parallel()
	b := setup(t, consume.Config{RetryInPlaceAttempts: 1000, RetryInPlaceFor: 300 * time.Millisecond}, map[string]func(int) error{
		"down": func(int) error { return &pgconn.PgError{Code: database.CodeAdminShutdown, Message: "admin shutdown"} },
	})
	b.produce("down")
	l := b.deadLetters(t, 1)[0]
	require.Equal(t, "transient", l.ErrorClass)
	require.Less(t, b.h.attempts("down"), 1000)
}

func TestPostgresRefusalsArePermanentAndDuplicatesAreNot(t *testing.T) {
	t.Parallel()
	b := setup(t, consume.Config{RetryInPlaceAttempts: 50}, map[string]func(int) error{
		"overflow": func(int) error {
			return &pgconn.PgError{Code: database.CodeNumericOutOfRange, Message: "bigint out of range"}
		},
		"check": func(int) error { return &pgconn.PgError{Code: database.CodeCheckViolation, Message: "check violation"} },
		"dup": func(n int) error {
			return map[bool]error{true: &pgconn.PgError{Code: database.CodeUniqueViolation, Message: "duplicate"}}[n < 2]
		},
	})
	for _, k := range append([]string{"overflow", "check", "dup"}, others...) {
		b.produce(k)
	}
	b.waitDone(t, append([]string{"dup"}, others...)...)
	letters := b.deadLetters(t, 2)
	for _, l := range letters {
		require.Equal(t, "permanent", l.ErrorClass)
		require.Contains(t, []string{"overflow", "check"}, l.PartitionKey)
		require.Equal(t, 1, l.RetryCount)
	}
	require.Equal(t, 1, b.h.attempts("overflow"))
}
