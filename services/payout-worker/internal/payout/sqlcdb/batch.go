package sqlcdb

// Written by hand (sqlc leaves this file alone): sqlc's :batch* statements
// each send a batch of their own, while the processor pipelines different
// statements in one batch (payout's move: the transitions and the update;
// the load with the consumer's processed check; a create's "sending" row
// with the move that starts sending it; a create's answer with the load
// that records it). These queue the generated
// statements, with their generated parameter structs, on a caller's batch.
// The argument order follows queries.sql.go's call of the same statement.

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// QueueLoad queues Load on b; fn gets its row (or pgx.ErrNoRows) when b's
// results are read.
func QueueLoad(b *pgx.Batch, id uuid.UUID, fn func(LoadRow, error) error) {
	b.Queue(load, id).QueryRow(func(row pgx.Row) error {
		var i LoadRow
		err := row.Scan(&i.ID, &i.UserID, &i.Amount, &i.Currency, &i.Destination, &i.Provider, &i.Status,
			&i.Attempts, &i.PSPReference, &i.PspUpdatedAt, &i.CorrelationID, &i.OutcomeUnknown, &i.LookupNeeded,
			&i.PspKey, &i.FirstAttemptAt, &i.LastUnknownAt, &i.CreatedAt, &i.SendingAt)
		return fn(i, err)
	})
}

// QueueTransition queues Transition on b; fn gets the new row's id (or the
// error) when b's results are read.
func QueueTransition(b *pgx.Batch, arg TransitionParams, fn func(int64, error) error) {
	b.Queue(transition, arg.PayoutID, arg.FromStatus, arg.ToStatus, arg.Attempt, arg.Error, arg.ErrorClass,
		arg.Detail).QueryRow(func(row pgx.Row) error {
		var id int64
		err := row.Scan(&id)
		return fn(id, err)
	})
}

// QueueUpdate queues Update on b.
func QueueUpdate(b *pgx.Batch, arg UpdateParams) {
	b.Queue(update, arg.Status, arg.Attempts, arg.PSPReference, arg.PspStatus, arg.PspUpdatedAt, arg.LastError,
		arg.ErrorClass, arg.OutcomeUnknown, arg.LookupNeeded, arg.PspKey, arg.FirstAttemptAt, arg.LastUnknownAt,
		arg.SendingAt, arg.ID)
}

// QueueRecordSending queues RecordSending on b; fn gets the new row's id
// (or the error) when b's results are read.
func QueueRecordSending(b *pgx.Batch, arg RecordSendingParams, fn func(int64, error) error) {
	b.Queue(recordSending, arg.PayoutID, arg.Attempt, arg.IdempotencyKey, arg.At).QueryRow(func(row pgx.Row) error {
		var id int64
		err := row.Scan(&id)
		return fn(id, err)
	})
}

// QueueFinishCreate queues FinishCreate on b; fn gets its error (nil when
// it succeeded) when b's results are read.
func QueueFinishCreate(b *pgx.Batch, arg FinishCreateParams, fn func(error) error) {
	b.Queue(finishCreate, arg.Outcome, arg.PSPReference, arg.Error, arg.ID).Fn = func(br pgx.BatchResults) error {
		_, err := br.Exec()
		return fn(err)
	}
}
