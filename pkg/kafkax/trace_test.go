package kafkax_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// With tracing on (as telemetry.Setup installs it), a record produced
// inside a trace carries its traceparent, and the consumer's handling span
// continues it: request → publish → receive → process.
func TestClientsCarryTheTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})

	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "traced"))
	require.NoError(t, err)
	defer c.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	producer, err := kafkax.NewClient(c.ListenAddrs(), logger)
	require.NoError(t, err)
	defer producer.Close()
	consumer, err := kafkax.NewClient(c.ListenAddrs(), logger, kgo.ConsumeTopics("traced"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer consumer.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rctx, request := tp.Tracer("test").Start(ctx, "request")
	require.NoError(t, producer.ProduceSync(rctx, &kgo.Record{Topic: "traced", Value: []byte(`{}`)}).FirstErr())
	request.End()

	fetches := consumer.PollFetches(ctx)
	require.NoError(t, fetches.Err())
	recs := fetches.Records()
	require.Len(t, recs, 1)
	require.Contains(t, kafkax.Header(recs[0], "traceparent"), request.SpanContext().TraceID().String())
	_, span := kafkax.NewProcessSpans("g").Start(ctx, recs[0])
	span.End()

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
	}
	chain := []string{"request", "traced publish", "traced receive", "traced process"}
	for i, name := range chain {
		s, ok := byName[name]
		require.True(t, ok, "no %q span; have %v", name, byName)
		require.Equal(t, request.SpanContext().TraceID(), s.SpanContext().TraceID(), name)
		if i > 0 {
			require.Equal(t, byName[chain[i-1]].SpanContext().SpanID(), s.Parent().SpanID(), "%s is a child of %s", name, chain[i-1])
		}
	}
	var zero kafkax.ProcessSpans
	_, none := zero.Start(ctx, recs[0])
	require.False(t, none.IsRecording(), "the zero ProcessSpans traces nothing")
}
