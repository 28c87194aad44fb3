package walletlock_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	goredislib "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/logging"
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
	l, err := walletlock.New(c, walletlock.Config{Expiry: expiry, Wait: wait}, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
