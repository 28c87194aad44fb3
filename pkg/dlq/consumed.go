package dlq

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// Consumed is a record as a consumer group read it: what the dead letter of
// a consumer's failure is made from.
type Consumed struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   map[string]string
	Group     string
}

// ConsumedRecord is r as group read it.
func ConsumedRecord(r *kgo.Record, group string) Consumed {
	h := make(map[string]string, len(r.Headers))
	for _, hd := range r.Headers {
		h[hd.Key] = string(hd.Value)
	}
	return Consumed{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Headers: h, Group: group}
}

// Letter starts the dead letter of c; the caller fills in the failure
// (WithFailure). It is filed under kafkax.LetterKey: the user's key also for
// a record keyed otherwise (a payout's retry), as dead letters are listed by
// user.
func (c Consumed) Letter() Letter {
	p, o := c.Partition, c.Offset
	headers := make(map[string]string, len(c.Headers))
	for k, v := range c.Headers {
		headers[k] = v
	}
	return Letter{
		Source: SourceConsumer, OriginalTopic: c.Topic, OriginalPartition: &p, OriginalOffset: &o,
		ConsumerGroup: c.Group, PartitionKey: kafkax.LetterKey(string(c.Key), c.Headers), EventType: c.Headers[kafkax.HeaderEventType],
		Payload: c.Value, Headers: headers, CorrelationID: c.Headers[kafkax.HeaderCorrelationID],
	}
}
