package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox/sqlcdb"
)

// processed_events is the consumer's idempotency record: written in the same
// transaction as the message's effect, so a redelivered or replayed message
// finds it and changes nothing. Its statements are in queries.sql.

// Once is how a handler applies m exactly once: it claims m in tx and runs
// effect (in tx) only when m was not processed before; a message already
// processed changes nothing and Once returns nil. A nil effect only claims:
// a message that ends with nothing to do (a stale or duplicate command) is
// still recorded, so its redelivery is skipped before any work. The claim
// comes first, so a concurrent duplicate waits on it until tx ends, then
// finds it and skips its effect; claim and effect hold only if tx commits.
//
// The claim is written here and in QueueClaim (the same statement, for a
// caller that pipelines it with its own); the credit path writes none: its
// ledger transaction, unique per payment and naming the message, is its
// record (ledger's CreditClaim), and it reads processed_events for
// messages recorded here.
func Once(ctx context.Context, tx pgx.Tx, m Message, effect func() error) error {
	fresh, err := claim(ctx, tx, m)
	if err != nil || !fresh || effect == nil {
		return err
	}
	return effect()
}

// InTx runs effect in a transaction of its own that claims m first: Once in
// database.InTx, for a handler whose whole transaction is m's effect.
func InTx(ctx context.Context, pool *pgxpool.Pool, m Message, effect func(tx pgx.Tx) error) error {
	return database.InTx(ctx, pool, func(tx pgx.Tx) error {
		return Once(ctx, tx, m, func() error { return effect(tx) })
	})
}

// claim records m as processed within tx and reports whether it was new.
// A concurrent duplicate waits on the row until tx ends, then finds it.
func claim(ctx context.Context, tx pgx.Tx, m Message) (bool, error) {
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
	arg := sqlcdb.ProcessedParams{ConsumerGroup: m.Group, EventID: m.ID()}
	q, err := database.Queue(b, func(r *database.Recorder) { _, _ = sqlcdb.New(r).Processed(ctx, arg) })
	if err != nil {
		return err
	}
	q.QueryRow(func(row pgx.Row) error {
		v, err := sqlcdb.New(database.Reply(row)).Processed(ctx, arg)
		if err != nil {
			return fmt.Errorf("check processed event: %w", err)
		}
		*done = v
		return nil
	})
	return nil
}

// QueueClaim queues on b Once's claim, for a caller that needs not know
// whether m was new: it lets the claim go in the same round trip as the
// caller's other statements. Like Once's, it holds only if tx commits.
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
