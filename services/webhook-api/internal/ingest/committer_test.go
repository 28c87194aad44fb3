package ingest_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/panics"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
)

// panickyWake panics while a group is being committed, the first n times.
type panickyWake struct{ left atomic.Int32 }

func (p *panickyWake) Notify() {}
func (p *panickyWake) QueueNotify(*pgx.Batch) bool {
	if p.left.Add(-1) >= 0 {
		panic("wake-up bug")
	}
	return false
}

// Issue 16: a panic in a committer goroutine used to kill webhook-api with
// every queued webhook. It is recovered, counted and logged; the webhooks
// of that group are answered with an error (nothing was committed, the PSP
// retries), and the committer goes on.
func TestCommitterSurvivesAPanicWhileCommitting(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	wake := &panickyWake{}
	wake.left.Store(1)
	counter := panics.NewCounter(prometheus.NewRegistry())
	c, err := ingest.NewCommitter(ingest.NewStore(db.Pool, wake, time.Now), 1, 8)
	require.NoError(t, err)
	c.WithPanics(counter, slog.New(slog.DiscardHandler)).Start()
	defer c.Stop()

	ctx := context.Background()
	_, err = c.Save(ctx, credit("evt_panic", "pi_panic", 0))
	require.ErrorContains(t, err, "panic in webhook-api/committer: wake-up bug")
	require.Equal(t, 1.0, counter.Value("webhook-api/committer"))
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM webhook_events").Scan(&n))
	require.Zero(t, n, "the panicking group was rolled back")

	// The same webhook retried by the PSP, and another one, are committed.
	for _, id := range []string{"evt_panic", "evt_next"} {
		saved, err := c.Save(ctx, credit(id, "pi_"+id, 0))
		require.NoError(t, err)
		require.Equal(t, ingest.Accepted, saved.Outcome)
	}
}
