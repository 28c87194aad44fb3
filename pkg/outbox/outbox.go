package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
	}
	return nil
}

// Insert writes msg in tx and returns its id. See the package doc for why it
// locks the partition key first.
func Insert(ctx context.Context, tx pgx.Tx, msg Message) (int64, error) {
	var id int64
	b := &pgx.Batch{}
	if err := Queue(b, msg, &id); err != nil {
		return 0, err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("insert outbox message: %w", err)
	}
	return id, nil
}

// Queue adds msg's statements (the key lock, then the insert) to b, for callers that pipeline them with their own statements inside an
// open transaction; id receives the row's id when the batch is read. The
// statements run in the order queued, so the lock is taken before the id is
// drawn.
func Queue(b *pgx.Batch, msg Message, id *int64) error {
	if err := msg.validate(); err != nil {
		return err
	}
	headers, err := json.Marshal(nonNil(msg.Headers))
	if err != nil {
		return fmt.Errorf("encode outbox headers: %w", err)
	}
	var notBefore *time.Time
	if !msg.NotBefore.IsZero() {
		notBefore = &msg.NotBefore
	}
	var maxRetries *int
	if msg.MaxRetries > 0 {
		maxRetries = &msg.MaxRetries
	}
	b.Queue(sqlLockKey, lockNamespace, msg.PartitionKey)
	b.Queue(sqlInsert, msg.Topic, msg.EventType, msg.PartitionKey, msg.Payload, headers,
		msg.CorrelationID, maxRetries, notBefore).QueryRow(func(row pgx.Row) error {
		return row.Scan(id)
	})
	return nil
}

func nonNil(h map[string]string) map[string]string {
	if h == nil {
		return map[string]string{}
	}
	return h
}
