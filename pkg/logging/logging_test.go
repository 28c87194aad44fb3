package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestLoggerAddsCorrelationID(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := New(&buf, "webhook-api", slog.LevelInfo).With("component", "ingest")
	ctx := WithCorrelationID(context.Background(), "corr-1")

	logger.InfoContext(ctx, "stored", "event_id", "evt_1")
	logger.Info("no context")
	logger.DebugContext(ctx, "filtered out")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("want 2 lines (debug filtered), got %d: %s", len(lines), buf.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(lines[1], &second); err != nil {
		t.Fatal(err)
	}
	if first["correlation_id"] != "corr-1" || first["service"] != "webhook-api" || first["component"] != "ingest" {
		t.Fatalf("first line missing attributes: %v", first)
	}
	if _, ok := second["correlation_id"]; ok {
		t.Fatalf("line without context must not carry a correlation id: %v", second)
	}
}

func TestParseLevel(t *testing.T) {
	t.Parallel()
	if l, err := ParseLevel("WARN"); err != nil || l != slog.LevelWarn {
		t.Fatalf("ParseLevel(WARN) = %v, %v", l, err)
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Fatal("ParseLevel(loud) must fail")
	}
	if a, b := NewCorrelationID(), NewCorrelationID(); a == b || len(a) != 32 {
		t.Fatalf("correlation ids must be random 32-hex: %q %q", a, b)
	}
}

// A line logged with a context holding a span carries its trace and span
// ids, so the trace can be found from the log and the log from the trace.
func TestLoggerAddsTraceIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := New(&buf, "payout-worker", slog.LevelInfo)
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "handle")
	logger.InfoContext(ctx, "in a span")
	span.End()
	logger.InfoContext(context.Background(), "no span")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %s", buf.String())
	}
	var in, out map[string]any
	if err := json.Unmarshal(lines[0], &in); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(lines[1], &out); err != nil {
		t.Fatal(err)
	}
	sc := span.SpanContext()
	if in["trace_id"] != sc.TraceID().String() || in["span_id"] != sc.SpanID().String() {
		t.Fatalf("line in a span: want trace %s span %s, got %v", sc.TraceID(), sc.SpanID(), in)
	}
	if _, ok := out["trace_id"]; ok {
		t.Fatalf("line without a span must not carry a trace id: %v", out)
	}
}
