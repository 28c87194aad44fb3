package walletlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"

	"github.com/aegis-payments/aegis/pkg/errclass"
)

// ErrLockLost is the cause of a work context cancelled because the lock
// could not be renewed.
var ErrLockLost = errors.New("wallet lock lost: renewal failed")

// ErrBusy means the lock could not be taken before the wait ran out.
var ErrBusy = errors.New("wallet lock busy")

// Config tunes the locks.
type Config struct {
	// Expiry is the lock's time to live (10s).
	Expiry time.Duration
	// Wait bounds how long Acquire tries before giving up with ErrBusy.
	Wait time.Duration
}

// Locker hands out wallet locks.
type Locker struct {
	rs     *redsync.Redsync
	nodes  []goredislib.UniversalClient
	cfg    Config
	logger *slog.Logger
}

// New returns a Locker over nodes: one Redis (REDIS_URL), or several
// independent ones (REDIS_URLS), in which case a lock is held only while a
// majority of them grant it (redsync's Redlock), so losing a minority of the
// nodes neither stops payouts nor lets two workers hold one wallet.
func New(cfg Config, logger *slog.Logger, nodes ...goredislib.UniversalClient) (*Locker, error) {
	if cfg.Expiry < time.Second {
		return nil, fmt.Errorf("wallet lock expiry %s must be at least 1s", cfg.Expiry)
	}
	if cfg.Wait <= 0 {
		return nil, errors.New("wallet lock wait must be positive")
	}
	if len(nodes) == 0 {
		return nil, errors.New("wallet locks need at least one Redis node")
	}
	pools := make([]redis.Pool, len(nodes))
	for i, n := range nodes {
		pools[i] = goredis.NewPool(n)
	}
	return &Locker{rs: redsync.New(pools...), nodes: nodes, cfg: cfg, logger: logger}, nil
}

// Quorum is how many nodes must grant a lock.
func (l *Locker) Quorum() int { return len(l.nodes)/2 + 1 }

// Ping is a readiness check: at least a quorum of the nodes answer, so a
// lock can be taken.
func (l *Locker) Ping(ctx context.Context) error {
	var errs []error
	for i, n := range l.nodes {
		if err := n.Ping(ctx).Err(); err != nil {
			errs = append(errs, fmt.Errorf("redis node %d: %w", i+1, err))
		}
	}
	if up := len(l.nodes) - len(errs); up < l.Quorum() {
		return fmt.Errorf("%d of %d Redis nodes answer, %d needed for a wallet lock: %w",
			up, len(l.nodes), l.Quorum(), errors.Join(errs...))
	}
	return nil
}

// Key is the Redis key of userID's wallet lock.
func Key(userID string) string { return "lock:wallet:" + userID }

// Lock is a held wallet lock.
type Lock struct {
	mutex   *redsync.Mutex
	ctx     context.Context
	cancel  context.CancelCauseFunc
	stop    chan struct{}
	stopped sync.WaitGroup
}

// Acquire takes userID's wallet lock, trying until cfg.Wait passes or ctx
// ends. The returned lock's Context is derived from ctx and is cancelled with
// ErrLockLost if a renewal fails. Failing to acquire is a transient error.
func (l *Locker) Acquire(ctx context.Context, userID string) (*Lock, error) {
	m := l.rs.NewMutex(Key(userID),
		redsync.WithExpiry(l.cfg.Expiry),
		redsync.WithTries(1<<20), // bounded by the wait context below
		redsync.WithRetryDelayFunc(func(tries int) time.Duration {
			return time.Duration(min(tries, 10)) * 10 * time.Millisecond
		}),
	)
	wait, cancel := context.WithTimeout(ctx, l.cfg.Wait)
	defer cancel()
	if err := m.LockContext(wait); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errclass.AsTransient(fmt.Errorf("%w: %s: %w", ErrBusy, Key(userID), err))
	}
	workCtx, cancelWork := context.WithCancelCause(ctx)
	lk := &Lock{mutex: m, ctx: workCtx, cancel: cancelWork, stop: make(chan struct{})}
	lk.stopped.Add(1)
	go lk.watchdog(workCtx, l.cfg.Expiry/2, l.logger)
	return lk, nil
}

// Context is cancelled when the lock is lost.
func (lk *Lock) Context() context.Context { return lk.ctx }

// watchdog renews the lock until Release or until work (the lock's
// context) ends.
func (lk *Lock) watchdog(work context.Context, every time.Duration, logger *slog.Logger) {
	defer lk.stopped.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-lk.stop:
			return
		case <-work.Done():
			return
		case <-t.C:
			// Renewed on the work's context: work that was cancelled needs
			// its lock no longer, and Release frees it.
			ctx, cancel := context.WithTimeout(work, every)
			ok, err := lk.mutex.ExtendContext(ctx)
			cancel()
			if work.Err() != nil {
				return
			}
			if !ok || err != nil {
				logger.Error("wallet lock renewal failed; cancelling the work", "lock", lk.mutex.Name(), "error", fmt.Sprint(err))
				lk.cancel(ErrLockLost)
				return
			}
		}
	}
}

// Release stops the watchdog and frees the lock if this worker still owns it.
func (lk *Lock) Release() {
	close(lk.stop)
	lk.stopped.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// An error means the lock expired or is someone else's now: nothing to free.
	_, _ = lk.mutex.UnlockContext(ctx)
	lk.cancel(nil)
}
