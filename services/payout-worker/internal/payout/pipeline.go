package payout

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout/sqlcdb"
)

// The statements the processor pipelines (a move's transitions and update;
// a load with the consumer's processed check; a create's "sending" row with
// the move that starts sending it; a create's answer with the load that
// records it) are queued on its pgx.Batch through database.Queue, so their
// text and argument order come from the generated methods, and a row is
// scanned by the generated method again (database.Reply).

// queue adds to b the statement call sends through sqlcdb (database.Queue).
func queue(b *pgx.Batch, call func(q *sqlcdb.Queries)) (*pgx.QueuedQuery, error) {
	return database.Queue(b, func(r *database.Recorder) { call(sqlcdb.New(r)) })
}

// queueRow queues the one-row statement call sends (a generated :one
// method); when b's results are read, fn gets what the same method returns
// for the row (or pgx.ErrNoRows, or the statement's error).
func queueRow[T any](b *pgx.Batch, call func(q *sqlcdb.Queries) (T, error), fn func(T, error) error) error {
	q, err := queue(b, func(q *sqlcdb.Queries) { _, _ = call(q) })
	if err != nil {
		return err
	}
	q.QueryRow(func(row pgx.Row) error { return fn(call(sqlcdb.New(database.Reply(row)))) })
	return nil
}

// queueExec queues the statement call sends (a generated :exec method);
// when b's results are read, fn gets its error (nil when it succeeded), or
// a failure stops the batch when fn is nil.
func queueExec(b *pgx.Batch, call func(q *sqlcdb.Queries) error, fn func(error) error) error {
	q, err := queue(b, func(q *sqlcdb.Queries) { _ = call(q) })
	if err != nil || fn == nil {
		return err
	}
	q.Fn = func(br pgx.BatchResults) error {
		_, err := br.Exec()
		return fn(err)
	}
	return nil
}

// queueLoad queues Load on b; fn gets its row (or pgx.ErrNoRows) when b's
// results are read.
func queueLoad(ctx context.Context, b *pgx.Batch, id uuid.UUID, fn func(sqlcdb.LoadRow, error) error) error {
	return queueRow(b, func(q *sqlcdb.Queries) (sqlcdb.LoadRow, error) { return q.Load(ctx, id) }, fn)
}
