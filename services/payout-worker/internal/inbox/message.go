package inbox

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// Message is a consumed record as handlers see it: its topic, partition,
// offset, key, value, headers (the last of each name) and group.
type Message dlq.Consumed

// New is the record r as group consumes it.
func New(r *kgo.Record, group string) Message { return Message(dlq.ConsumedRecord(r, group)) }

// ID is the message's identity for processed_events: the producer's
// message_id header, or its position when it has none.
func (m Message) ID() string {
	if id := m.Headers[kafkax.HeaderMessageID]; id != "" {
		return id
	}
	return m.Topic + "/" + strconv.Itoa(int(m.Partition)) + "/" + strconv.FormatInt(m.Offset, 10)
}

// CorrelationID is the correlation_id header.
func (m Message) CorrelationID() string { return m.Headers[kafkax.HeaderCorrelationID] }

// Letter starts the dead letter of this message (dlq.Consumed.Letter);
// the caller fills in the failure (error, class, retry count and history,
// times).
func (m Message) Letter() dlq.Letter { return dlq.Consumed(m).Letter() }
