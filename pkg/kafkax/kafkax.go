package kafkax

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-payments/aegis/pkg/telemetry"
)

// Topics (docs/design/contract.md, "Kafka").
const (
	TopicWebhookPending = "aegis.webhook.pending"
	TopicTransactions   = "aegis.transactions"
	TopicSettlements    = "aegis.settlements"
	TopicOutboxDLQ      = "aegis.outbox.dlq"
)

// DLQTopic is the dead-letter topic of topic.
func DLQTopic(topic string) string { return topic + ".dlq" }

// AllTopics lists every topic Aegis uses, dead-letter topics included.
func AllTopics() []string {
	return []string{
		TopicWebhookPending, DLQTopic(TopicWebhookPending),
		TopicTransactions, DLQTopic(TopicTransactions),
		TopicSettlements, DLQTopic(TopicSettlements),
		TopicOutboxDLQ,
	}
}

// Header names.
const (
	HeaderCorrelationID = "correlation_id"
	HeaderEventType     = "event_type"
	HeaderMessageID     = "message_id"
	// HeaderUserKey is the user's partition key on a record keyed by
	// something else so that it holds back none of the user's records (a
	// payout's scheduled retry, keyed by its payout): the key its dead
	// letter is filed under, so that it lists with the user's letters.
	HeaderUserKey = "user_key"
)

// LetterKey is the partition key a dead letter of a record (its key and
// headers) is filed under: the user's (HeaderUserKey) when the record
// carries one, else the record's own.
func LetterKey(key string, headers map[string]string) string {
	if u := headers[HeaderUserKey]; u != "" {
		return u
	}
	return key
}

// Header returns the value of the last header named key, or "".
func Header(r *kgo.Record, key string) string {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return string(r.Headers[i].Value)
		}
	}
	return ""
}

// SetHeader replaces every header named key with one carrying value.
func SetHeader(r *kgo.Record, key, value string) {
	kept := r.Headers[:0]
	for _, h := range r.Headers {
		if h.Key != key {
			kept = append(kept, h)
		}
	}
	r.Headers = append(kept, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

// NewClient builds a franz-go client for brokers with Aegis's logging and
// kotel's tracing: a produced record gets a "publish" span, child of the
// context it was produced with, whose W3C traceparent goes into the record's
// headers; a fetched record gets a "receive" span continuing the traceparent
// it carries (ProcessSpans starts the handling span under it). With tracing
// off (telemetry.On false when the client is made) the hooks are not
// installed: no span, no header. opts add the producer
// or consumer settings of the caller.
func NewClient(brokers []string, logger *slog.Logger, opts ...kgo.Opt) (*kgo.Client, error) {
	if len(brokers) == 0 {
		return nil, errors.New("no Kafka brokers configured (KAFKA_BROKERS)")
	}
	base := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.WithLogger(kgoLogger{logger.With("component", "kafka")}),
	}
	if telemetry.On() {
		base = append(base, kgo.WithHooks(kotel.NewKotel(kotel.WithTracer(kotel.NewTracer())).Hooks()...))
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("create kafka client: %w", err)
	}
	return cl, nil
}

// ProcessSpans starts the spans of a consumer group's handling of records.
// Make one per consumer: kotel's tracer reads the build info when made.
type ProcessSpans struct{ t *kotel.Tracer }

// NewProcessSpans returns the ProcessSpans of group.
func NewProcessSpans(group string) ProcessSpans {
	if !telemetry.On() {
		return ProcessSpans{}
	}
	return ProcessSpans{kotel.NewTracer(kotel.ConsumerGroup(group))}
}

// Start starts the span of the handling of r (kotel's "<topic> process"), a
// child of the record's receive span and so of the trace its producer wrote
// into its headers, and returns ctx (the consumer's own, with its deadline
// and cancellation) carrying it. End the span when the record is handled.
func (p ProcessSpans) Start(ctx context.Context, r *kgo.Record) (context.Context, trace.Span) {
	if p.t == nil { // the zero ProcessSpans traces nothing
		return ctx, trace.SpanFromContext(context.Background())
	}
	parent := r.Context
	if parent == nil {
		parent = context.Background()
	}
	// kotel starts the span under r.Context: give it the consumer's ctx
	// with the receive span in it, then restore the record.
	r.Context = trace.ContextWithSpan(ctx, trace.SpanFromContext(parent))
	sctx, span := p.t.WithProcessSpan(r)
	r.Context = parent
	return sctx, span
}

// EnsureTopics creates topics that do not exist yet, each with partitions
// partitions and the broker's default replication factor.
func EnsureTopics(ctx context.Context, cl *kgo.Client, partitions int32, topics ...string) error {
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopics(ctx, partitions, -1, nil, topics...)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, t := range resp.Sorted() {
		if t.Err != nil && !errors.Is(t.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", t.Topic, t.Err)
		}
	}
	return nil
}

// Ping is a readiness check: the cluster answers a metadata request.
func Ping(cl *kgo.Client) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := cl.Ping(ctx); err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
		return nil
	}
}

// kgoLogger adapts slog to franz-go, keeping only warnings and errors:
// franz-go's info level narrates every metadata refresh.
type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelWarn
	if level == kgo.LogLevelError {
		lvl = slog.LevelError
	}
	k.l.Log(context.Background(), lvl, msg, keyvals...)
}
