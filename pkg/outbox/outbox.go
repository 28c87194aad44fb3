package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/outbox/sqlcdb"
	"github.com/aegis-payments/aegis/pkg/telemetry"
)

// NotifyChannel is the LISTEN/NOTIFY channel a Notifier signals on; relays
// listen to wake immediately instead of waiting for their next poll.
const NotifyChannel = "aegis_outbox"

// lockNamespace namespaces Insert's advisory locks (two-int4 form) away from
// other advisory lock users such as golang-migrate.
const lockNamespace = 1_701_001

// Message is one record to publish.
type Message struct {
	Topic        string
	EventType    string
	PartitionKey string
	// Payload is the record value; it must be valid JSON.
	Payload       []byte
	Headers       map[string]string
	CorrelationID string
	// MaxRetries overrides the default of 6 publish attempts when positive.
	MaxRetries int
	// NotBefore delays publication (a scheduled retry); zero means now.
	NotBefore time.Time
}

func (m Message) validate() error {
	switch {
	case m.Topic == "":
		return errors.New("outbox message without topic")
	case m.EventType == "":
		return errors.New("outbox message without event type")
	case !json.Valid(m.Payload):
		return errors.New("outbox message payload is not valid JSON")
	case m.MaxRetries > math.MaxInt32:
		return fmt.Errorf("outbox message max retries %d out of range", m.MaxRetries)
	}
	return nil
}

// Insert writes msg in tx and returns its id. See the package doc for why it
// locks the partition key first. When ctx is inside a trace, its W3C
// traceparent (and tracestate) go into the row's headers, replacing any the
// message carried: the relay publishes them as Kafka headers, and the
// consumer's handling joins the trace that wrote the row.
func Insert(ctx context.Context, tx pgx.Tx, msg Message) (int64, error) {
	msg.Headers = telemetry.Inject(ctx, msg.Headers)
	ids := make([]int64, 1)
	b := &pgx.Batch{}
	if err := Queue(ctx, b, []Message{msg}, ids); err != nil {
		return 0, err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("insert outbox message: %w", err)
	}
	return ids[0], nil
}

// Queue adds the statements writing msgs to b, for callers that pipeline them
// with their own statements inside an open transaction: one statement takes
// the key locks of all of them, one inserts them all, whatever their number.
// The statements run in the order queued, so the locks are held before any
// id is drawn. If ids is not nil it must have one element per message and
// receives their ids, in msgs order, when the batch is read.
func Queue(ctx context.Context, b *pgx.Batch, msgs []Message, ids []int64) error {
	if len(msgs) == 0 {
		return nil
	}
	if ids != nil && len(ids) != len(msgs) {
		return fmt.Errorf("queue outbox messages: %d ids for %d messages", len(ids), len(msgs))
	}
	var (
		topics     = make([]string, len(msgs))
		types      = make([]string, len(msgs))
		keys       = make([]string, len(msgs))
		payloads   = make([][]byte, len(msgs))
		headers    = make([][]byte, len(msgs))
		corrIDs    = make([]string, len(msgs))
		maxRetries = make([]*int32, len(msgs))
		notBefore  = make([]*time.Time, len(msgs))
	)
	for i, m := range msgs {
		if err := m.validate(); err != nil {
			return err
		}
		h, err := json.Marshal(nonNil(m.Headers))
		if err != nil {
			return fmt.Errorf("encode outbox headers: %w", err)
		}
		topics[i], types[i], keys[i], payloads[i], headers[i], corrIDs[i] = m.Topic, m.EventType, m.PartitionKey, m.Payload, h, m.CorrelationID
		if m.MaxRetries > 0 {
			n := int32(m.MaxRetries) //nolint:gosec // G115: validate() bounds it to MaxInt32
			maxRetries[i] = &n
		}
		if !m.NotBefore.IsZero() {
			notBefore[i] = &m.NotBefore
		}
	}
	if _, err := database.Queue(b, func(r *database.Recorder) {
		_ = sqlcdb.New(r).LockKeys(ctx, sqlcdb.LockKeysParams{Namespace: lockNamespace, Keys: keys})
	}); err != nil {
		return err
	}
	// Not through database.Queue, the reason written here: the last two
	// arrays hold NULL elements for "the default", which the generated
	// method's []int and []time.Time cannot carry, so InsertMessages is
	// queued by its exported text, its arguments in sqlcdb.InsertMessagesParams
	// order.
	q := b.Queue(sqlcdb.InsertMessages, topics, types, keys, payloads, headers, corrIDs, maxRetries, notBefore)
	if ids != nil {
		q.Query(func(rows pgx.Rows) error {
			got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return fmt.Errorf("insert outbox messages: %w", err)
			}
			if len(got) != len(ids) {
				return fmt.Errorf("insert outbox messages: %d rows for %d messages", len(got), len(ids))
			}
			// The ids were drawn in msgs order (InsertMessages' ORDER BY);
			// RETURNING promises no order of its own.
			slices.Sort(got)
			copy(ids, got)
			return nil
		})
	}
	return nil
}

func nonNil(h map[string]string) map[string]string {
	if h == nil {
		return map[string]string{}
	}
	return h
}
