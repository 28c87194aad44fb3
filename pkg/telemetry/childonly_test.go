package telemetry_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aegis-payments/aegis/pkg/telemetry"
)

// A ChildOnly tracer records inside a trace and nothing outside one.
func TestChildOnly(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	redis := telemetry.ChildOnly(tp).Tracer("redis")

	_, orphan := redis.Start(context.Background(), "ping")
	if orphan.IsRecording() {
		t.Fatal("a span without a parent must not record")
	}
	orphan.End()
	ctx, parent := tp.Tracer("test").Start(context.Background(), "handle")
	_, child := redis.Start(ctx, "set")
	child.End()
	parent.End()

	ended := rec.Ended()
	if len(ended) != 2 || ended[0].Name() != "set" || ended[0].Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("want the child span under its parent and nothing else, got %d spans", len(ended))
	}
}
