package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox/sqlcdb"
)

// processed_events is the consumer's idempotency record: written in the same
// transaction as the message's effect, so a redelivered or replayed message
// finds it and changes nothing. Its statements are in queries.sql.

// Claim records m as processed within tx and reports whether it was new. A
// concurrent duplicate waits on the row until tx ends, then finds it.
func Claim(ctx context.Context, tx pgx.Tx, m Message) (bool, error) {
	_, err := sqlcdb.New(tx).Claim(ctx, sqlcdb.ClaimParams{ConsumerGroup: m.Group, EventID: m.ID()})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("record processed event: %w", err)
	}
	return true, nil
}

// Processed reports whether m was already processed.
func Processed(ctx context.Context, tx pgx.Tx, m Message) (bool, error) {
	done, err := sqlcdb.New(tx).Processed(ctx, sqlcdb.ProcessedParams{ConsumerGroup: m.Group, EventID: m.ID()})
	if err != nil {
		return false, fmt.Errorf("check processed event: %w", err)
	}
	return done, nil
}

// QueueProcessed queues on b the check whether m was already processed; done
// is set when b's results are read. It lets a caller send the check in the
// same round trip as its first statement.
func QueueProcessed(ctx context.Context, b *pgx.Batch, m Message, done *bool) error {
	q, err := database.Queue(b, func(r *database.Recorder) {
		_, _ = sqlcdb.New(r).Processed(ctx, sqlcdb.ProcessedParams{ConsumerGroup: m.Group, EventID: m.ID()})
	})
	if err != nil {
		return err
	}
	q.QueryRow(func(r pgx.Row) error {
		if err := r.Scan(done); err != nil {
			return fmt.Errorf("check processed event: %w", err)
		}
		return nil
	})
	return nil
}

// QueueClaim queues on b what Claim does, for a caller that needs not know
// whether m was new: it lets the claim go in the same round trip as the
// caller's other statements. Like Claim, it holds only if tx commits.
func QueueClaim(ctx context.Context, b *pgx.Batch, m Message) error {
	q, err := database.Queue(b, func(r *database.Recorder) {
		_, _ = sqlcdb.New(r).Claim(ctx, sqlcdb.ClaimParams{ConsumerGroup: m.Group, EventID: m.ID()})
	})
	if err != nil {
		return err
	}
	q.Exec(func(pgconn.CommandTag) error { return nil })
	return nil
}
