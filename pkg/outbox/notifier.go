package outbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Notifier wakes the relays after writers commit outbox rows.
//
// The notification is deliberately not part of the writer's transaction:
// Postgres serializes the commits of all notifying transactions on one global
// lock, which would undo group commit on the ingest path. Writers call Notify
// after their commit instead; the notifier sends at most one NOTIFY per
// interval on a connection of its own, so a burst of commits costs one
// notification. If the process dies between a commit and its notification,
// the relays' poll finds the row one poll interval later: NOTIFY is a latency
// hint, never what delivery depends on.
type Notifier struct {
	pool     *pgxpool.Pool
	interval time.Duration
	logger   *slog.Logger
	pending  chan struct{}
}

// NewNotifier returns a notifier sending at most one NOTIFY per interval.
func NewNotifier(pool *pgxpool.Pool, interval time.Duration, logger *slog.Logger) *Notifier {
	return &Notifier{pool: pool, interval: interval, logger: logger, pending: make(chan struct{}, 1)}
}

// Notify asks for a notification soon. It never blocks.
func (n *Notifier) Notify() {
	select {
	case n.pending <- struct{}{}:
	default:
	}
}

// Run sends the notifications until ctx is done.
func (n *Notifier) Run(ctx context.Context) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.pending:
		}
		if wait := n.interval - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		if _, err := n.pool.Exec(ctx, sqlNotify, NotifyChannel); err != nil && ctx.Err() == nil {
			// The relays poll anyway; a missed wake-up only costs latency.
			n.logger.Warn("outbox notify failed; relays will find the rows on their next poll", "error", err.Error())
		}
	}
}
