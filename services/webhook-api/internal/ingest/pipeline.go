package ingest

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest/sqlcdb"
)

// errRecorded stops a generated sqlcdb method after its statement was
// recorded: the statement runs later, in a pipeline.
var errRecorded = errors.New("statement recorded for a pipeline")

// recorder is a sqlcdb.DBTX that runs nothing: it keeps the statement and
// arguments a generated method passes, so that the statement joins a
// pgx.Batch (one round trip for the whole transaction) with its text and
// argument order taken from the generated code, not copied by hand.
type recorder struct {
	sql  string
	args []any
}

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.sql, r.args = sql, args
	return pgconn.CommandTag{}, errRecorded
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.sql, r.args = sql, args
	return nil, errRecorded
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.sql, r.args = sql, args
	return recordedRow{}
}

type recordedRow struct{}

func (recordedRow) Scan(...any) error { return errRecorded }

// queue adds to b the statement that call makes through sqlcdb and returns
// it, for the caller to attach how its rows are read. The result of call
// is ignored: it only says the statement was recorded.
func queue(b *pgx.Batch, call func(q *sqlcdb.Queries)) (*pgx.QueuedQuery, error) {
	var r recorder
	call(sqlcdb.New(&r))
	if r.sql == "" {
		return nil, fmt.Errorf("queue statement: the sqlcdb method sent nothing")
	}
	return b.Queue(r.sql, r.args...), nil
}
