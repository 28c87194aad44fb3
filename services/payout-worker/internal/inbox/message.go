package inbox

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// Message is a consumed record as handlers see it.
type Message struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   map[string]string
	Group     string
}

// New is the record r as group consumes it.
func New(r *kgo.Record, group string) Message {
	h := make(map[string]string, len(r.Headers))
	for _, hd := range r.Headers {
		h[hd.Key] = string(hd.Value)
	}
	return Message{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Headers: h, Group: group}
}

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

// Letter starts the dead letter of this message; the caller fills in the
// failure (error, class, retry count and history, times). It is filed under
// kafkax.LetterKey: the user's key also for a record keyed otherwise (a
// payout's retry), as dead letters are listed by user.
func (m Message) Letter() dlq.Letter {
	p, o := m.Partition, m.Offset
	headers := make(map[string]string, len(m.Headers))
	for k, v := range m.Headers {
		headers[k] = v
	}
	return dlq.Letter{
		Source: dlq.SourceConsumer, OriginalTopic: m.Topic, OriginalPartition: &p, OriginalOffset: &o,
		ConsumerGroup: m.Group, PartitionKey: kafkax.LetterKey(string(m.Key), m.Headers), EventType: m.Headers[kafkax.HeaderEventType],
		Payload: m.Value, Headers: headers, CorrelationID: m.CorrelationID(),
	}
}
