package ingest

import (
	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest/sqlcdb"
)

// queue adds to b the statement that call makes through sqlcdb
// (database.Queue) and returns it, for the caller to attach how its rows
// are read. The result of call is ignored: it only says the statement was
// recorded.
func queue(b *pgx.Batch, call func(q *sqlcdb.Queries)) (*pgx.QueuedQuery, error) {
	return database.Queue(b, func(r *database.Recorder) { call(sqlcdb.New(r)) })
}
