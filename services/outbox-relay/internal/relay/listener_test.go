package relay_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/relay"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/relay/sqlcdb"
)

// listening starts Run with a poll interval of ten minutes and Listen, and
// returns once the relay's first (empty) cycle is done and a LISTEN
// connection is up: from then on only a notification can wake the relay.
func (b *bundle) listening(t *testing.T) *relay.Relay {
	t.Helper()
	r, _ := b.newRelay(t, relayOpts{now: time.Now, poll: 10 * time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	runDone, listenDone := make(chan error, 1), make(chan struct{})
	go func() { done := r.Run(ctx); runDone <- done }()
	go func() {
		relay.Listen(ctx, b.db.URL, slog.New(slog.NewJSONHandler(io.Discard, nil)), r.Wake)
		close(listenDone)
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-runDone)
		<-listenDone
	})
	b.waitListener(t, 0)
	time.Sleep(100 * time.Millisecond) // the wake-ups Listen sends on connecting are spent
	return r
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

// commitAndNotify commits a row and a NOTIFY in one transaction, as
// webhook-api does, and returns the row id and the commit time.
func (b *bundle) commitAndNotify(t *testing.T, key string) (int64, time.Time) {
	t.Helper()
	id := b.insert(t, key, 1, 0)
	_, err := b.db.Pool.Exec(context.Background(), "SELECT pg_notify($1, '')", outbox.NotifyChannel)
	require.NoError(t, err)
	return id, time.Now()
}

// waitProcessed waits for row id to be published; the bound is far below
// the ten-minute poll interval, so only the notification can have woken the
// relay in time.
func (b *bundle) waitProcessed(t *testing.T, id int64, since time.Time) time.Duration {
	t.Helper()
	require.Eventually(t, func() bool { st, _ := b.status(t, id); return st == "processed" },
		10*time.Second, 2*time.Millisecond, "row %d not published: the notification did not wake the relay", id)
	return time.Since(since)
}

func TestANotificationWakesTheRelayLongBeforeItsPoll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.listening(t)
	for i := range 3 {
		id, at := b.commitAndNotify(t, "user-notify")
		t.Logf("row %d published %s after its commit (poll interval 10m)", i, b.waitProcessed(t, id, at))
	}
}

func TestTheRelayReconnectsItsListenerAndStillWakes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.listening(t)
	for round := range 2 {
		pid := b.waitListener(t, 0)
		var killed bool
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", pid).Scan(&killed))
		require.True(t, killed)
		b.waitListener(t, pid)
		time.Sleep(100 * time.Millisecond)
		id, at := b.commitAndNotify(t, "user-reconnect")
		t.Logf("round %d: after the listener was killed, a row was published %s after its commit", round, b.waitProcessed(t, id, at))
	}
}
