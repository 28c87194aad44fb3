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

// queueLoad queues Load on b; fn gets its row (or pgx.ErrNoRows) when b's
// results are read.
func queueLoad(ctx context.Context, b *pgx.Batch, id uuid.UUID, fn func(sqlcdb.LoadRow, error) error) error {
	q, err := queue(b, func(q *sqlcdb.Queries) { _, _ = q.Load(ctx, id) })
	if err != nil {
		return err
	}
	q.QueryRow(func(row pgx.Row) error { return fn(sqlcdb.New(database.Reply(row)).Load(ctx, id)) })
	return nil
}

// queueTransition queues Transition on b; fn gets the new row's id (or the
// error) when b's results are read.
func queueTransition(ctx context.Context, b *pgx.Batch, arg sqlcdb.TransitionParams, fn func(int64, error) error) error {
	q, err := queue(b, func(q *sqlcdb.Queries) { _, _ = q.Transition(ctx, arg) })
	if err != nil {
		return err
	}
	q.QueryRow(func(row pgx.Row) error { return fn(sqlcdb.New(database.Reply(row)).Transition(ctx, arg)) })
	return nil
}

// queueUpdate queues Update on b.
func queueUpdate(ctx context.Context, b *pgx.Batch, arg sqlcdb.UpdateParams) error {
	_, err := queue(b, func(q *sqlcdb.Queries) { _ = q.Update(ctx, arg) })
	return err
}

// queueRecordSending queues RecordSending on b; fn gets the new row's id
// (or the error) when b's results are read.
func queueRecordSending(ctx context.Context, b *pgx.Batch, arg sqlcdb.RecordSendingParams, fn func(int64, error) error) error {
	q, err := queue(b, func(q *sqlcdb.Queries) { _, _ = q.RecordSending(ctx, arg) })
	if err != nil {
		return err
	}
	q.QueryRow(func(row pgx.Row) error { return fn(sqlcdb.New(database.Reply(row)).RecordSending(ctx, arg)) })
	return nil
}

// queueFinishCreate queues FinishCreate on b; fn gets its error (nil when
// it succeeded) when b's results are read.
func queueFinishCreate(ctx context.Context, b *pgx.Batch, arg sqlcdb.FinishCreateParams, fn func(error) error) error {
	q, err := queue(b, func(q *sqlcdb.Queries) { _ = q.FinishCreate(ctx, arg) })
	if err != nil {
		return err
	}
	q.Fn = func(br pgx.BatchResults) error {
		_, err := br.Exec()
		return fn(err)
	}
	return nil
}
