package ingest_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/lifecycle"
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

// A panic in a committer goroutine does not kill webhook-api with every
// queued webhook: it is recovered, counted and logged; the webhooks
// of that group are answered with an error (nothing was committed, the PSP
// retries), and the committer goes on.
func TestCommitterSurvivesAPanicWhileCommitting(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	wake := &panickyWake{}
	wake.left.Store(1)
	counter := panics.NewCounter(prometheus.NewRegistry())
	c, err := ingest.NewCommitter(ingest.NewStore(db.Pool, wake, time.Now), ingest.CommitterConfig{Workers: 1, MaxGroup: 8},
		lifecycle.Deps{Logger: slog.New(slog.DiscardHandler), Panics: counter})
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	defer func() { require.NoError(t, c.Stop(context.Background())) }()

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

// Stop commits what was queued, a second Stop is harmless, and a webhook offered
// after Stop is refused (5xx, the PSP retries) instead of panicking or
// waiting forever.
func TestCommitterStopIsOnceAndCommitsWhatIsQueued(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	c, err := ingest.NewCommitter(ingest.NewStore(db.Pool, &panickyWake{}, time.Now), ingest.CommitterConfig{Workers: 2, MaxGroup: 4, MinLine: 64, Budget: time.Hour}, lifecycle.Deps{})
	require.NoError(t, err)
	require.NoError(t, c.Stop(context.Background()), "stop before start")
	require.NoError(t, c.Start(context.Background()))
	ctx := context.Background()
	results := make(chan error, 20)
	for i := range 20 {
		go func() {
			_, err := c.Save(ctx, credit(fmt.Sprintf("evt_stop_%d", i), fmt.Sprintf("pi_stop_%d", i), 0))
			results <- err
		}()
	}
	require.Eventually(t, func() bool { return len(results) > 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, c.Stop(ctx))
	require.NoError(t, c.Stop(ctx), "second stop")
	var accepted int
	for range 20 {
		if err := <-results; err == nil {
			accepted++
		} else {
			require.ErrorIs(t, err, ingest.ErrStopped)
		}
	}
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM webhook_events").Scan(&n))
	require.Equal(t, accepted, n, "every webhook answered OK was committed, no other")
	_, err = c.Save(ctx, credit("evt_late", "pi_late", 0))
	require.ErrorIs(t, err, ingest.ErrStopped)
}

// A Postgres that accepts connections but never answers does not hold
// shutdown: Stop is bounded by its context: in-flight commits are cancelled and every
// committer goroutine has returned when it does.
func TestCommitterStopIsBoundedWhenPostgresHangs(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() { // accept and never answer: a paused or partitioned Postgres
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@"+ln.Addr().String()+"/aegis?sslmode=disable")
	require.NoError(t, err)
	defer pool.Close()
	c, err := ingest.NewCommitter(ingest.NewStore(pool, &panickyWake{}, time.Now), ingest.CommitterConfig{Workers: 1, MaxGroup: 8}, lifecycle.Deps{})
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))

	saveCtx, cancelSave := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelSave()
	_, err = c.Save(saveCtx, credit("evt_hang", "pi_hang", 0))
	require.ErrorIs(t, err, context.DeadlineExceeded, "the caller gives up; the commit is still in flight")

	stopCtx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = c.Stop(stopCtx)
	require.ErrorIs(t, err, lifecycle.ErrHardStop, "Stop gives up on the hung commit when its bound ends")
	select {
	case <-c.Done():
	default:
		t.Fatal("a committer goroutine outlived Stop")
	}
}

// Admission is bounded by time, not only by count. While
// Postgres commits nothing for four budgets (a stall), a webhook is
// refused at once (ErrOverloaded, a 503 with Retry-After) although the
// line has room for a thousand; the webhook stuck in the commit is
// committed once Postgres moves, the refused one is not stored, and the
// next webhook is admitted again.
func TestCommitterShedsWhenTheCommitOutlastsTheBudget(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	const budget = 200 * time.Millisecond
	var elapsed atomic.Int64 // the committer's clock runs only when the test moves it
	start := time.Now()
	clock := func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
	c, err := ingest.NewCommitter(ingest.NewStore(db.Pool, noNotify{}, time.Now),
		ingest.CommitterConfig{Workers: 1, MaxGroup: 4, MinLine: 1000, Budget: budget}, lifecycle.Deps{Clock: clock})
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	defer func() { require.NoError(t, c.Stop(context.Background())) }()
	ctx := context.Background()

	blocker, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback(ctx) }()
	_, err = blocker.Exec(ctx, "LOCK TABLE webhook_events IN SHARE MODE")
	require.NoError(t, err)

	stuck := make(chan error, 1)
	go func() {
		saved, err := c.Save(ctx, credit("evt_stuck", "pi_stuck", 0))
		if err == nil && saved.Outcome != ingest.Accepted {
			err = fmt.Errorf("outcome %q", saved.Outcome)
		}
		stuck <- err
	}()
	// A budget passes on the committer's clock at each look: once its
	// commit has been stuck for four of them, it is full.
	require.Eventually(t, func() bool {
		elapsed.Add(int64(budget))
		return c.Full()
	}, 10*time.Second, 10*time.Millisecond, "the committer has been stuck in a commit beyond the budget and still admits webhooks")
	_, err = c.Save(ctx, credit("evt_shed", "pi_shed", 0))
	require.ErrorIs(t, err, ingest.ErrOverloaded)
	select {
	case err := <-stuck:
		t.Fatalf("the stuck webhook was answered while Postgres was still locked: %v", err)
	default: // refused at once: the refusal did not wait for the stuck commit
	}

	require.NoError(t, blocker.Commit(ctx))
	select {
	case err := <-stuck:
		require.NoError(t, err, "the webhook in the stuck commit")
	case <-time.After(30 * time.Second):
		t.Fatal("the stuck webhook was never answered")
	}
	saved, err := c.Save(ctx, credit("evt_after", "pi_after", 0))
	require.NoError(t, err)
	require.Equal(t, ingest.Accepted, saved.Outcome)

	var stored []string
	rows, err := db.Pool.Query(ctx, "SELECT event_id FROM webhook_events ORDER BY event_id")
	require.NoError(t, err)
	stored, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"evt_after", "evt_stuck"}, stored, "the refused webhook must not be stored, the others must")
}
