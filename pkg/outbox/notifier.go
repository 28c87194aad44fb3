package outbox

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/outbox/sqlcdb"
)

// Notifier wakes the relays after writers commit outbox rows.
//
// The notification is deliberately not part of the writer's transaction:
// Postgres serializes the commits of all notifying transactions on one global
// lock, which would undo group commit on the ingest path. Writers send it
// after their commit instead, at most one per interval, so a burst of commits
// costs one notification: either in the same pipeline as their transaction,
// right after its COMMIT (QueueNotify, no extra round trip), or by asking the
// notifier to send one on a connection of its own (Notify). If the process
// dies between a commit and its notification, the relays' poll finds the row
// one poll interval later: NOTIFY is a latency hint, never what delivery
// depends on.
type Notifier struct {
	pool     *pgxpool.Pool
	interval time.Duration
	logger   *slog.Logger
	pending  chan struct{}
	// last is when the latest notification was claimed and asked when
	// Notify was last called (both UnixNano). A notification claimed after
	// a Notify covers it: it executes after that caller's commit.
	last, asked atomic.Int64
}

// NotifyInterval is the writers' notifier interval: a busy writer sends at
// most 1,000 NOTIFYs a second, and a relay hears of a commit at most this
// much later.
const NotifyInterval = time.Millisecond

// NewNotifier returns a notifier sending at most one NOTIFY per interval.
func NewNotifier(pool *pgxpool.Pool, interval time.Duration, logger *slog.Logger) *Notifier {
	return &Notifier{pool: pool, interval: interval, logger: logger, pending: make(chan struct{}, 1)}
}

// Notify asks for a notification soon, after a commit. It never blocks.
func (n *Notifier) Notify() {
	n.asked.Store(time.Now().UnixNano())
	select {
	case n.pending <- struct{}{}:
	default:
	}
}

// QueueNotify adds a NOTIFY to b when one is due and reports whether it did.
// Call it after queueing the COMMIT of a pipelined transaction: the
// notification then executes right after the commit, in the same round trip.
// A caller that got false calls Notify after its commit; so does one whose
// batch failed, since the notification it claimed, which other writers'
// commits may count on, was not sent.
func (n *Notifier) QueueNotify(b *pgx.Batch) bool {
	if !n.claim() {
		return false
	}
	if _, err := database.Queue(b, func(r *database.Recorder) {
		_ = sqlcdb.New(r).Notify(context.Background(), NotifyChannel)
	}); err != nil {
		// Unreachable: Notify always sends its statement. Not queued, so
		// the caller notifies after its commit.
		return false
	}
	return true
}

// claim takes the right to send the next notification if one is due.
func (n *Notifier) claim() bool {
	now, last := time.Now().UnixNano(), n.last.Load()
	return now-last >= int64(n.interval) && n.last.CompareAndSwap(last, now)
}

// Run sends the notifications asked for with Notify until ctx is done; it
// returns nil then (the shape of lifecycle.Func).
func (n *Notifier) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-n.pending:
		}
		for {
			if wait := time.Duration(n.last.Load() + int64(n.interval) - time.Now().UnixNano()); wait > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(wait):
				}
			}
			if n.last.Load() >= n.asked.Load() {
				break // a writer's pipeline carried it meanwhile
			}
			if n.claim() {
				if err := sqlcdb.New(n.pool).Notify(ctx, NotifyChannel); err != nil && ctx.Err() == nil {
					// The relays poll anyway; a missed wake-up only costs latency.
					n.logger.Warn("outbox notify failed; relays will find the rows on their next poll", "error", err.Error())
				}
				break
			}
		}
	}
}
