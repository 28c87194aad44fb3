package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is a pgx.Tx or a *pgxpool.Pool.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// ON CONFLICT without a target covers every unique index: the origin of a
// consumer letter, the outbox row of a relay letter, and the DLQ record a
// letter was read from.
const sqlInsert = `
INSERT INTO dead_letters
    (source, original_topic, original_partition, original_offset, consumer_group, outbox_id,
     partition_key, event_type, payload, headers, error, error_class, retry_count, retry_history,
     first_failure_at, failed_at, correlation_id, dlq_topic, dlq_partition, dlq_offset)
VALUES ($1, $2, $3, $4, nullif($5, ''), $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
        nullif($18, ''), $19, $20)
ON CONFLICT DO NOTHING
RETURNING id`

// Insert stores l unless a letter with the same origin is already stored, and
// reports the row id and whether this call inserted it. Text Postgres would
// refuse (NUL, invalid UTF-8) is replaced with U+FFFD first, so a malformed
// letter cannot stall its writer; the payload is bytea and kept as is.
func Insert(ctx context.Context, q Querier, l Letter) (id int64, inserted bool, err error) {
	if !slices.Contains(Sources(), l.Source) {
		return 0, false, fmt.Errorf("dead letter source %q", l.Source)
	}
	l = sanitized(l)
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
		l.RetryCount, history, l.FirstFailureAt, l.FailedAt, l.CorrelationID, l.DLQTopic, l.DLQPartition, l.DLQOffset).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("insert dead letter: %w", err)
	}
	return id, true, nil
}

// sanitized returns l with every text field storable in text and jsonb.
func sanitized(l Letter) Letter {
	for _, s := range []*string{&l.OriginalTopic, &l.ConsumerGroup, &l.PartitionKey, &l.EventType,
		&l.Error, &l.ErrorClass, &l.CorrelationID, &l.DLQTopic} {
		*s = clean(*s)
	}
	if l.RetryHistory != nil {
		h := make([]Attempt, len(l.RetryHistory))
		for i, a := range l.RetryHistory {
			h[i] = Attempt{At: a.At, Error: clean(a.Error), Class: clean(a.Class)}
		}
		l.RetryHistory = h
	}
	if l.Headers != nil {
		hd := make(map[string]string, len(l.Headers))
		for k, v := range l.Headers {
			hd[clean(k)] = clean(v)
		}
		l.Headers = hd
	}
	return l
}

// clean replaces what Postgres text refuses: invalid UTF-8 and NUL.
func clean(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
