package relay_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/relay"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/relay/sqlcdb"
)

// listener is a relay woken by Listen. The wake-up Listen sends on each
// (re)connection is kept from the relay and reported on connected instead,
// so that a row reaches the relay only by its notification; the wake-up of
// a notification the test sent (notified) goes to the relay.
type listener struct {
	b         *bundle
	notified  atomic.Bool
	connected chan struct{}
}

// listening starts Run with a poll interval of ten minutes and Listen, and
// returns once the relay's first cycle is done (it published a row
// committed before it) and the LISTEN connection is up: from then on only
// a notification can wake the relay.
func (b *bundle) listening(t *testing.T) *listener {
	t.Helper()
	l := &listener{b: b, connected: make(chan struct{}, 16)}
	first := b.insert(t, "user-first", 1, 0)
	r, _ := b.newRelay(t, relayOpts{now: time.Now, poll: 10 * time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	runDone, listenDone := make(chan error, 1), make(chan struct{})
	go func() { done := r.Run(ctx); runDone <- done }()
	go func() {
		relay.Listen(ctx, b.db.URL, slog.New(slog.NewJSONHandler(io.Discard, nil)), func() {
			if l.notified.CompareAndSwap(true, false) {
				r.Wake()
				return
			}
			select {
			case l.connected <- struct{}{}:
			default:
			}
		})
		close(listenDone)
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-runDone)
		<-listenDone
	})
	b.waitProcessed(t, first, time.Now())
	l.waitConnected(t)
	return l
}

// waitConnected waits for Listen's wake-up on (re)connecting: it listens.
func (l *listener) waitConnected(t *testing.T) {
	t.Helper()
	select {
	case <-l.connected:
	case <-time.After(20 * time.Second):
		t.Fatal("Listen never (re)connected")
	}
}

// commitAndNotify commits a row and then a NOTIFY, as webhook-api does,
// and returns the row id and the commit time.
func (l *listener) commitAndNotify(t *testing.T, key string) (int64, time.Time) {
	t.Helper()
	id := l.b.insert(t, key, 1, 0)
	l.notified.Store(true)
	_, err := l.b.db.Pool.Exec(context.Background(), "SELECT pg_notify($1, '')", outbox.NotifyChannel)
	require.NoError(t, err)
	return id, time.Now()
}

// waitListener waits for a backend LISTENing on this test's database other
// than not, and returns its pid.
func (b *bundle) waitListener(t *testing.T, not int) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		err := b.db.Pool.QueryRow(context.Background(), `
			SELECT pid FROM pg_stat_activity
			WHERE datname = $1 AND query = $3 AND pid <> $2 LIMIT 1`,
			b.db.Name, not, sqlcdb.Listen).Scan(&pid)
		return err == nil
	}, 20*time.Second, 5*time.Millisecond, "no LISTEN connection")
	return pid
}

// waitProcessed waits for row id to be published; the bound is far below
// the ten-minute poll interval, so only the notification can have woken the
// relay in time.
func (b *bundle) waitProcessed(t *testing.T, id int64, since time.Time) time.Duration {
	t.Helper()
	require.Eventually(t, func() bool { st, _ := b.status(t, id); return st == published },
		10*time.Second, 2*time.Millisecond, "row %d not published: the notification did not wake the relay", id)
	return time.Since(since)
}

func TestANotificationWakesTheRelayLongBeforeItsPoll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := b.listening(t)
	for i := range 3 {
		id, at := l.commitAndNotify(t, "user-notify")
		t.Logf("row %d published %s after its commit (poll interval 10m)", i, b.waitProcessed(t, id, at))
	}
}

func TestTheRelayReconnectsItsListenerAndStillWakes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := b.listening(t)
	for round := range 2 {
		pid := b.waitListener(t, 0)
		var killed bool
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", pid).Scan(&killed))
		require.True(t, killed)
		b.waitListener(t, pid)
		l.waitConnected(t)
		id, at := l.commitAndNotify(t, "user-reconnect")
		t.Logf("round %d: after the listener was killed, a row was published %s after its commit", round, b.waitProcessed(t, id, at))
	}
}
