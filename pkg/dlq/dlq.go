package dlq

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbox"
)

// Sources of dead letters.
const (
	SourceIngest   = "ingest"
	SourceRelay    = "relay"
	SourceConsumer = "consumer"
	// SourceSweeper is a payout the worker's sweeper parked for a person
	// (a PSP record it cannot settle on, a deadline passed): no record
	// failed, so the letter has no consumer group or offset; its payload is
	// the payout's command, which a replay sends again.
	SourceSweeper = "sweeper"
)

// Header names on <topic>.dlq records, after Spring Kafka's DLT headers.
const (
	HeaderOriginalTopic     = "original_topic"
	HeaderOriginalPartition = "original_partition"
	HeaderOriginalOffset    = "original_offset"
	HeaderConsumerGroup     = "consumer_group"
	HeaderError             = "error"
	HeaderErrorClass        = "error_class"
	HeaderRetryCount        = "retry_count"
	HeaderRetryHistory      = "retry_history"
	HeaderFirstFailureAt    = "first_failure_at"
	HeaderFailedAt          = "failed_at"
	HeaderSource            = "dlq_source"
	HeaderOutboxID          = "outbox_id"
)

// failureHeaders are replaced, never accumulated, when a replayed message
// fails again.
var failureHeaders = []string{
	HeaderOriginalTopic, HeaderOriginalPartition, HeaderOriginalOffset, HeaderConsumerGroup,
	HeaderError, HeaderErrorClass, HeaderRetryCount, HeaderRetryHistory,
	HeaderFirstFailureAt, HeaderFailedAt, HeaderSource, HeaderOutboxID,
}

// Attempt is one failed try.
type Attempt struct {
	At    time.Time `json:"at"`
	Error string    `json:"error"`
	Class string    `json:"class"`
}

// Letter is one dead letter.
type Letter struct {
	Source            string
	OriginalTopic     string
	OriginalPartition *int32
	OriginalOffset    *int64
	ConsumerGroup     string
	OutboxID          *int64
	PartitionKey      string
	EventType         string
	Payload           []byte
	// Headers are the original record's headers, failure headers removed.
	Headers        map[string]string
	Error          string
	ErrorClass     string
	RetryCount     int
	RetryHistory   []Attempt
	FirstFailureAt time.Time
	FailedAt       time.Time
	CorrelationID  string
	// DLQTopic, DLQPartition and DLQOffset are where dlq-admin read the
	// letter from Kafka; unset for letters written straight to the table.
	DLQTopic     string
	DLQPartition *int32
	DLQOffset    *int64
}

// Topic is where the letter is published: <original>.dlq for consumer
// failures, aegis.outbox.dlq for the relay's.
func (l Letter) Topic() string {
	if l.Source == SourceRelay {
		return kafkax.TopicOutboxDLQ
	}
	return kafkax.DLQTopic(l.OriginalTopic)
}

// Record builds the dead-letter record: the original value and headers plus
// the failure headers.
func (l Letter) Record() (*kgo.Record, error) {
	history, err := json.Marshal(nonNilHistory(l.RetryHistory))
	if err != nil {
		return nil, fmt.Errorf("encode retry history: %w", err)
	}
	r := &kgo.Record{Topic: l.Topic(), Key: []byte(l.PartitionKey), Value: l.Payload}
	for k, v := range l.Headers {
		if isFailureHeader(k) {
			continue
		}
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	add := func(k, v string) { kafkax.SetHeader(r, k, v) }
	add(HeaderSource, l.Source)
	add(HeaderOriginalTopic, l.OriginalTopic)
	if l.OriginalPartition != nil {
		add(HeaderOriginalPartition, strconv.FormatInt(int64(*l.OriginalPartition), 10))
	}
	if l.OriginalOffset != nil {
		add(HeaderOriginalOffset, strconv.FormatInt(*l.OriginalOffset, 10))
	}
	if l.OutboxID != nil {
		add(HeaderOutboxID, strconv.FormatInt(*l.OutboxID, 10))
	}
	add(HeaderConsumerGroup, l.ConsumerGroup)
	add(HeaderError, l.Error)
	add(HeaderErrorClass, l.ErrorClass)
	add(HeaderRetryCount, strconv.Itoa(l.RetryCount))
	add(HeaderRetryHistory, string(history))
	add(HeaderFirstFailureAt, l.FirstFailureAt.UTC().Format(time.RFC3339Nano))
	add(HeaderFailedAt, l.FailedAt.UTC().Format(time.RFC3339Nano))
	add(kafkax.HeaderCorrelationID, l.CorrelationID)
	if l.EventType != "" {
		add(kafkax.HeaderEventType, l.EventType)
	}
	return r, nil
}

// FromRecord reads a dead letter back from a <topic>.dlq record. It never
// gives up on a record: a header it cannot read is left empty (never a made-up
// 0 that could collide with a real letter's origin) and named in problems,
// which are also appended to the letter's error text. The record's own
// position is kept as the letter's DLQ coordinates, the dedupe key of a
// letter without a usable origin.
func FromRecord(r *kgo.Record) (l Letter, problems []string) {
	h := make(map[string]string, len(r.Headers))
	for _, hd := range r.Headers {
		h[hd.Key] = string(hd.Value)
	}
	dp, do := r.Partition, r.Offset
	l = Letter{
		Source:        h[HeaderSource],
		OriginalTopic: h[HeaderOriginalTopic],
		ConsumerGroup: h[HeaderConsumerGroup],
		PartitionKey:  string(r.Key),
		EventType:     h[kafkax.HeaderEventType],
		Payload:       r.Value,
		Error:         h[HeaderError],
		ErrorClass:    h[HeaderErrorClass],
		CorrelationID: h[kafkax.HeaderCorrelationID],
		Headers:       map[string]string{},
		DLQTopic:      r.Topic,
		DLQPartition:  &dp,
		DLQOffset:     &do,
	}
	bad := func(header, v, want string) {
		problems = append(problems, fmt.Sprintf("%s %s is not %s", header, short(v), want))
	}
	switch {
	case l.Source == "":
		l.Source = SourceConsumer
	case !slices.Contains(Sources(), l.Source):
		bad(HeaderSource, l.Source, "one of "+strings.Join(Sources(), ", "))
		l.Source = SourceConsumer
	}
	if l.OriginalTopic == "" {
		l.OriginalTopic = strings.TrimSuffix(r.Topic, ".dlq")
	}
	if l.Payload == nil {
		l.Payload = []byte{}
	}
	for k, v := range h {
		if !isFailureHeader(k) {
			l.Headers[k] = v
		}
	}
	if v := h[HeaderOriginalPartition]; v != "" {
		if p, err := strconv.ParseInt(v, 10, 32); err == nil && p >= 0 {
			p32 := int32(p)
			l.OriginalPartition = &p32
		} else {
			bad(HeaderOriginalPartition, v, "a partition number")
		}
	}
	if v := h[HeaderOriginalOffset]; v != "" {
		if o, err := strconv.ParseInt(v, 10, 64); err == nil && o >= 0 {
			l.OriginalOffset = &o
		} else {
			bad(HeaderOriginalOffset, v, "an offset")
		}
	}
	if v := h[HeaderOutboxID]; v != "" {
		if id, err := strconv.ParseInt(v, 10, 64); err == nil && id > 0 {
			l.OutboxID = &id
		} else {
			bad(HeaderOutboxID, v, "an outbox id")
		}
	}
	if v := h[HeaderRetryCount]; v != "" {
		// retry_count is int4: a larger value would fail every insert.
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 && n <= math.MaxInt32 {
			l.RetryCount = int(n)
		} else {
			bad(HeaderRetryCount, v, "a retry count")
		}
	}
	if v := h[HeaderRetryHistory]; v != "" {
		if err := json.Unmarshal([]byte(v), &l.RetryHistory); err != nil {
			l.RetryHistory = nil
			bad(HeaderRetryHistory, v, "a JSON list of attempts")
		}
	}
	l.FirstFailureAt = parseTime(h[HeaderFirstFailureAt], r.Timestamp, HeaderFirstFailureAt, bad)
	l.FailedAt = parseTime(h[HeaderFailedAt], r.Timestamp, HeaderFailedAt, bad)
	if l.Error == "" {
		l.Error = "dead letter without error header"
	}
	if l.ErrorClass == "" {
		l.ErrorClass = "unknown"
	}
	if len(problems) > 0 {
		l.Error = fmt.Sprintf("%s [dead-letter headers malformed: %s]", l.Error, strings.Join(problems, "; "))
	}
	return l, problems
}

func parseTime(v string, fallback time.Time, header string, bad func(header, v, want string)) time.Time {
	if v == "" {
		return fallback
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		bad(header, v, "an RFC 3339 time")
		return fallback
	}
	return t
}

// short quotes a header value for an error message, cut to a readable length.
func short(v string) string {
	const limit = 64
	if len(v) > limit {
		return strconv.Quote(v[:limit]) + "…"
	}
	return strconv.Quote(v)
}

func isFailureHeader(k string) bool {
	for _, f := range failureHeaders {
		if k == f {
			return true
		}
	}
	return false
}

func nonNilHistory(h []Attempt) []Attempt {
	if h == nil {
		return []Attempt{}
	}
	return h
}

// OutboxMessage turns the letter into an outbox message for its dead-letter
// topic, so a consumer can dead-letter in the same transaction as the state
// change that gave up (FAILED, NEEDS_REVIEW): a crash after the commit cannot
// lose the dead letter. The payload must be JSON (the outbox stores jsonb);
// an undecodable record is published directly instead (see Record).
func (l Letter) OutboxMessage() (outbox.Message, error) {
	if !json.Valid(l.Payload) {
		return outbox.Message{}, fmt.Errorf("dead letter payload is not JSON; publish it directly")
	}
	rec, err := l.Record()
	if err != nil {
		return outbox.Message{}, err
	}
	headers := make(map[string]string, len(rec.Headers))
	for _, h := range rec.Headers {
		headers[h.Key] = string(h.Value)
	}
	eventType := l.EventType
	if eventType == "" {
		eventType = "dead_letter"
	}
	return outbox.Message{
		Topic: rec.Topic, EventType: eventType, PartitionKey: l.PartitionKey, Payload: l.Payload,
		Headers: headers, CorrelationID: l.CorrelationID,
	}, nil
}

// HeaderPayloadFormat says what a dead letter's payload is when it is not a
// message of its original topic. PayloadPSPWebhook: the PSP's webhook body
// exactly as it was received, dead-lettered at ingest because it could not
// be stored as sent (an over-long user id, a \u0000 Postgres refuses). It
// cannot be published as it is; dlq-admin refuses to replay it.
const (
	HeaderPayloadFormat = "payload_format"
	PayloadPSPWebhook   = "psp_webhook"
)
