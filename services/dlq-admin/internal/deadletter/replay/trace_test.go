package replay_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
)

// A replay continues the trace stored with the letter: its span is a child
// of the failed message's traceparent, linked to the operator's request,
// and the republished row carries the replay span's traceparent, so the
// consumer's second try joins the payment's trace.
func TestReplayContinuesTheStoredTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	// As telemetry.Setup does when tracing is on.
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})

	const payTrace, failedSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	b := setup(t)
	id := b.letter(t, func(l *dlq.Letter) { l.Headers["traceparent"] = "00-" + payTrace + "-" + failedSpan + "-01" })
	ctx, request := tp.Tracer("test").Start(context.Background(), "POST /v1/dead-letters/{id}/replay")
	res, err := b.svc.Replay(ctx, id, "bob", "psp fixed")
	request.End()
	require.NoError(t, err)
	require.Equal(t, store.OutcomeRepublished, res.Outcome)

	var replaySpan sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "dead letter replay" {
			replaySpan = s
		}
	}
	require.NotNil(t, replaySpan, "a replay span")
	require.Equal(t, payTrace, replaySpan.SpanContext().TraceID().String(), "the replay is in the payment's trace")
	require.Equal(t, failedSpan, replaySpan.Parent().SpanID().String())
	require.Len(t, replaySpan.Links(), 1)
	require.Equal(t, request.SpanContext().TraceID(), replaySpan.Links()[0].SpanContext.TraceID(), "linked to the operator's request")

	rows := b.outbox(t)
	require.Len(t, rows, 1)
	parts := strings.Split(rows[0].Headers["traceparent"], "-")
	require.Len(t, parts, 4, rows[0].Headers)
	require.Equal(t, payTrace, parts[1])
	require.Equal(t, replaySpan.SpanContext().SpanID().String(), parts[2], "the row's parent is the replay span")
}
