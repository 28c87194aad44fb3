package database

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// errRecorded stops a generated sqlcdb method after its statement was
// recorded: the statement runs later, in the caller's pipeline.
var errRecorded = errors.New("statement recorded for a pipeline")

// Recorder is a sqlcdb.DBTX (every store's sqlcdb.New takes it) that runs
// nothing: it keeps the statement and arguments a generated method passes.
// Queue uses it so that statements join one pgx.Batch (one round trip)
// with their text and argument order taken from the generated code, never
// copied by hand.
type Recorder struct {
	sql  string
	args []any
}

// Exec records the statement.
func (r *Recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.sql, r.args = sql, args
	return pgconn.CommandTag{}, errRecorded
}

// Query records the statement.
func (r *Recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.sql, r.args = sql, args
	return nil, errRecorded
}

// QueryRow records the statement; scanning its row fails.
func (r *Recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.sql, r.args = sql, args
	return recordedRow{}
}

type recordedRow struct{}

func (recordedRow) Scan(...any) error { return errRecorded }

// Queue adds to b the statement that call sends through r (a generated
// method on sqlcdb.New(r)) and returns it, for the caller to attach how
// its rows are read (QueryRow, Exec). What the generated method returns is
// to be ignored: it only says the statement was recorded.
//
// This is the one way statements are pipelined: sqlc's :batch kinds send a
// batch per statement, while a hot path sends different statements in one.
func Queue(b *pgx.Batch, call func(r *Recorder)) (*pgx.QueuedQuery, error) {
	var r Recorder
	call(&r)
	if r.sql == "" {
		return nil, fmt.Errorf("queue statement: the sqlcdb method sent nothing")
	}
	return b.Queue(r.sql, r.args...), nil
}

// Reply is a sqlcdb.DBTX that answers a generated method's QueryRow with a
// row already read from a pipeline: call the same generated method on
// sqlcdb.New(Reply(row)) inside the QueuedQuery's QueryRow, and the row is
// scanned by the generated code too, so neither the statement's text, its
// argument order nor its columns are ever copied by hand.
func Reply(row pgx.Row) ReplyRow { return ReplyRow{row: row} }

// ReplyRow is what Reply returns. Its Exec and Query fail: a statement
// without a row is read by the QueuedQuery's Exec.
type ReplyRow struct{ row pgx.Row }

// errNotRow is a misuse of Reply: only QueryRow has a row to replay.
var errNotRow = errors.New("a replayed pipeline row answers QueryRow only")

// Exec fails (see ReplyRow).
func (ReplyRow) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errNotRow
}

// Query fails (see ReplyRow).
func (ReplyRow) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, errNotRow }

// QueryRow returns the replayed row.
func (r ReplyRow) QueryRow(context.Context, string, ...any) pgx.Row { return r.row }
