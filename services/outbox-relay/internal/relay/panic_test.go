package relay_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/panics"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/relay"
)

// panickyProducer panics on its first n Produce calls.
type panickyProducer struct {
	relay.Producer
	left atomic.Int32
}

func (p *panickyProducer) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	if p.left.Add(-1) >= 0 {
		panic("producer bug")
	}
	p.Producer.Produce(ctx, r, promise)
}

// A panic while publishing is a failed attempt of the batch's rows
// (retried with backoff, dead-lettered when attempts run out), counted and
// logged; the relay goes on.
func TestAPanicWhilePublishingIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	counter := panics.NewCounter(prometheus.NewRegistry())
	r, _ := b.newRelay(t, relayOpts{panics: counter, wrap: func(p relay.Producer) relay.Producer {
		pp := &panickyProducer{Producer: p}
		pp.left.Store(1)
		return pp
	}})
	id := b.insert(t, "user-1", 1, 0)
	drain(t, r)
	st, retries := b.status(t, id)
	require.Equal(t, "failed", st, "failed: waiting for its retry")
	require.Equal(t, 1, retries)
	require.Equal(t, 1.0, counter.Value("outbox-relay/publish"))
	var lastError string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT last_error FROM transaction_outbox WHERE id = $1", id).Scan(&lastError))
	require.Contains(t, lastError, "panic in outbox-relay/publish: producer bug")

	b.clock.Add(time.Minute) // past the backoff
	drain(t, r)
	st, _ = b.status(t, id)
	require.Equal(t, published, st)
	require.Len(t, kafkatest.ReadAll(t, b.cluster, kafkax.TopicWebhookPending, 1, 10*time.Second), 1)
}

// A panic elsewhere in a cycle (here the clock) restarts the loop, not the
// process: Run keeps relaying.
func TestAPanicInTheRelayLoopRestartsTheLoop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	counter := panics.NewCounter(prometheus.NewRegistry())
	var calls atomic.Int32
	r, _ := b.newRelay(t, relayOpts{panics: counter, now: func() time.Time {
		if calls.Add(1) <= 2 {
			panic("clock bug")
		}
		return time.Now()
	}})
	id := b.insert(t, "user-1", 1, 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	require.Eventually(t, func() bool { st, _ := b.status(t, id); return st == published }, 20*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	require.Equal(t, 2.0, counter.Value("outbox-relay/loop"))
}
