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

	"github.com/aegis-payments/aegis/pkg/dlq/sqlcdb"
)

// Insert stores l unless a letter with the same origin is already stored, and
// reports the row id and whether this call inserted it. Text Postgres would
// refuse (NUL, invalid UTF-8) is replaced with U+FFFD first, so a malformed
// letter cannot stall its writer; the payload is bytea and kept as is. db is
// a pgx.Tx (the letter commits with the caller's work), a connection or a
// pool.
func Insert(ctx context.Context, db sqlcdb.DBTX, l Letter) (id int64, inserted bool, err error) {
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
	id, err = sqlcdb.New(db).InsertDeadLetter(ctx, sqlcdb.InsertDeadLetterParams{
		Source:            l.Source,
		OriginalTopic:     l.OriginalTopic,
		OriginalPartition: l.OriginalPartition,
		OriginalOffset:    l.OriginalOffset,
		ConsumerGroup:     l.ConsumerGroup,
		OutboxID:          l.OutboxID,
		PartitionKey:      l.PartitionKey,
		EventType:         l.EventType,
		Payload:           payload,
		Headers:           headers,
		Error:             l.Error,
		ErrorClass:        l.ErrorClass,
		RetryCount:        l.RetryCount,
		RetryHistory:      history,
		FirstFailureAt:    l.FirstFailureAt,
		FailedAt:          l.FailedAt,
		CorrelationID:     l.CorrelationID,
		DLQTopic:          l.DLQTopic,
		DLQPartition:      l.DLQPartition,
		DLQOffset:         l.DLQOffset,
	})
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
