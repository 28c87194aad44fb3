package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is a pgx.Tx or a *pgxpool.Pool.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

const sqlInsert = `
INSERT INTO dead_letters
    (source, original_topic, original_partition, original_offset, consumer_group, outbox_id,
     partition_key, event_type, payload, headers, error, error_class, retry_count, retry_history,
     first_failure_at, failed_at, correlation_id)
VALUES ($1, $2, $3, $4, nullif($5, ''), $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
ON CONFLICT DO NOTHING
RETURNING id`

// Insert stores l unless a letter with the same origin is already stored, and
// reports the row id and whether this call inserted it.
func Insert(ctx context.Context, q Querier, l Letter) (id int64, inserted bool, err error) {
	if l.Source != SourceIngest && l.Source != SourceRelay && l.Source != SourceConsumer {
		return 0, false, fmt.Errorf("dead letter source %q", l.Source)
	}
	headers, err := json.Marshal(l.Headers)
	if err != nil {
		return 0, false, fmt.Errorf("encode dead-letter headers: %w", err)
	}
	if l.Headers == nil {
		headers = []byte("{}")
	}
	history, err := json.Marshal(nonNilHistory(l.RetryHistory))
	if err != nil {
		return 0, false, fmt.Errorf("encode retry history: %w", err)
	}
	payload := l.Payload
	if payload == nil {
		payload = []byte{}
	}
	err = q.QueryRow(ctx, sqlInsert, l.Source, l.OriginalTopic, l.OriginalPartition, l.OriginalOffset,
		l.ConsumerGroup, l.OutboxID, l.PartitionKey, l.EventType, payload, headers, l.Error, l.ErrorClass,
		l.RetryCount, history, l.FirstFailureAt, l.FailedAt, l.CorrelationID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("insert dead letter: %w", err)
	}
	return id, true, nil
}
