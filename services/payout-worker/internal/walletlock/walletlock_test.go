package walletlock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	goredislib "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/walletlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func redisClient(t *testing.T) *goredislib.Client {
	t.Helper()
	url := os.Getenv("TEST_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := goredislib.ParseURL(url)
	require.NoError(t, err)
	c := goredislib.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Ping(context.Background()).Err(), "Redis must run on %s (make test starts it)", url)
	return c
}

func locker(t *testing.T, c *goredislib.Client, expiry, wait time.Duration) *walletlock.Locker {
	t.Helper()
	l, err := walletlock.New(walletlock.Config{Expiry: expiry, Wait: wait}, slog.New(slog.NewTextHandler(io.Discard, nil)), c)
	require.NoError(t, err)
	return l
}

func TestLockIsExclusiveAndReleased(t *testing.T) {
	t.Parallel()
	c := redisClient(t)
	user := "u-" + logging.NewCorrelationID()
	a := locker(t, c, 10*time.Second, 300*time.Millisecond)
	lk, err := a.Acquire(context.Background(), user)
	require.NoError(t, err)

	_, err = a.Acquire(context.Background(), user)
	require.ErrorIs(t, err, walletlock.ErrBusy)
	require.Equal(t, errclass.Transient, errclass.Of(err), "a busy wallet is retried later")

	ttl, err := c.PTTL(context.Background(), walletlock.Key(user)).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, 9*time.Second, "lock:wallet:{user_id} with a 10s expiry")

	lk.Release()
	require.Zero(t, c.Exists(context.Background(), walletlock.Key(user)).Val())
	lk2, err := a.Acquire(context.Background(), user)
	require.NoError(t, err)
	lk2.Release()
}

func TestWatchdogRenewsWhileWorkRuns(t *testing.T) {
	t.Parallel()
	c := redisClient(t)
	user := "u-" + logging.NewCorrelationID()
	l := locker(t, c, time.Second, 200*time.Millisecond)
	lk, err := l.Acquire(context.Background(), user)
	require.NoError(t, err)
	defer lk.Release()

	// Well past the expiry, the lock is still ours and the work goes on.
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		require.NoError(t, lk.Context().Err())
		_, err := l.Acquire(context.Background(), user)
		require.ErrorIs(t, err, walletlock.ErrBusy)
	}
}

func TestLostLockCancelsTheWorkAndIsNotReleasedByItsFormerOwner(t *testing.T) {
	t.Parallel()
	c := redisClient(t)
	user := "u-" + logging.NewCorrelationID()
	l := locker(t, c, time.Second, 200*time.Millisecond)
	lk, err := l.Acquire(context.Background(), user)
	require.NoError(t, err)

	// Redis loses the key (a restart) and another worker takes the wallet.
	require.NoError(t, c.Del(context.Background(), walletlock.Key(user)).Err())
	other, err := l.Acquire(context.Background(), user)
	require.NoError(t, err)
	defer other.Release()

	select {
	case <-lk.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("work context must be cancelled when renewal fails")
	}
	require.True(t, errors.Is(context.Cause(lk.Context()), walletlock.ErrLockLost))
	lk.Release()
	require.EqualValues(t, 1, c.Exists(context.Background(), walletlock.Key(user)).Val(),
		"the former owner must not free the new owner's lock")
}

// redisNodes starts n independent redis-server processes, as REDIS_URLS
// names them in production.
func redisNodes(t *testing.T, n int) ([]*proctest.Proc, []goredislib.UniversalClient) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	require.NoError(t, err, "redis-server must be installed (scripts/devdeps.sh installs it)")
	procs := make([]*proctest.Proc, n)
	clients := make([]goredislib.UniversalClient, n)
	for i := range n {
		port := proctest.FreePort(t)
		procs[i] = proctest.Start(t, fmt.Sprintf("redis-%d", i+1), bin, nil,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		c := goredislib.NewClient(&goredislib.Options{Addr: proctest.Addr(port), MaxRetries: -1,
			DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond})
		t.Cleanup(func() { _ = c.Close() })
		require.Eventually(t, func() bool { return c.Ping(context.Background()).Err() == nil },
			10*time.Second, 20*time.Millisecond, "redis node %d did not start", i+1)
		clients[i] = c
	}
	return procs, clients
}

// TestRedlockKeepsTheLockWhenAMinorityOfNodesDies runs a lock over three
// Redis processes and kills one while the work runs: the lock is renewed on
// the other two and stays exclusive. Killing a second one (no quorum left)
// cancels the work, as losing the only Redis does.
func TestRedlockKeepsTheLockWhenAMinorityOfNodesDies(t *testing.T) {
	t.Parallel()
	procs, nodes := redisNodes(t, 3)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := walletlock.Config{Expiry: 2 * time.Second, Wait: 300 * time.Millisecond}
	a, err := walletlock.New(cfg, logger, nodes...)
	require.NoError(t, err)
	b, err := walletlock.New(cfg, logger, nodes...)
	require.NoError(t, err)
	require.Equal(t, 2, a.Quorum())
	ctx := context.Background()
	user := "u-" + logging.NewCorrelationID()

	lk, err := a.Acquire(ctx, user)
	require.NoError(t, err)
	for i, n := range nodes {
		require.Equal(t, int64(1), n.Exists(ctx, walletlock.Key(user)).Val(), "node %d holds the lock", i+1)
	}

	procs[2].Kill() // a node dies in the middle of a payout
	// Two renewals seen on a surviving node (its TTL jumps back up): the
	// first, made without the dead node, was accepted, or there would be
	// no second.
	renewals, last := 0, nodes[0].PTTL(ctx, walletlock.Key(user)).Val()
	require.Eventually(t, func() bool {
		ttl := nodes[0].PTTL(ctx, walletlock.Key(user)).Val()
		if ttl > last {
			renewals++
		}
		last = ttl
		return renewals == 2
	}, 3*cfg.Expiry, 10*time.Millisecond, "the lock is not renewed on the surviving nodes")
	require.NoError(t, lk.Context().Err(), "two of three nodes renew the lock: the work goes on")
	require.NoError(t, a.Ping(ctx), "a quorum answers: ready")
	_, err = b.Acquire(ctx, user)
	require.ErrorIs(t, err, walletlock.ErrBusy, "still exclusive on the surviving majority")
	lk.Release()

	lk, err = b.Acquire(ctx, user)
	require.NoError(t, err, "a lock is taken on two of three nodes")

	procs[1].Kill() // no quorum left
	require.Eventually(t, func() bool { return lk.Context().Err() != nil }, 3*cfg.Expiry, 20*time.Millisecond,
		"without a quorum the lock cannot be renewed and the work is cancelled")
	require.ErrorIs(t, context.Cause(lk.Context()), walletlock.ErrLockLost)
	lk.Release()
	require.ErrorContains(t, a.Ping(ctx), "1 of 3 Redis nodes answer, 2 needed")
	_, err = a.Acquire(ctx, "u-"+logging.NewCorrelationID())
	require.ErrorIs(t, err, walletlock.ErrBusy, "no lock without a quorum")
	require.Equal(t, errclass.Transient, errclass.Of(err), "and the payout is retried later, not failed")
}
