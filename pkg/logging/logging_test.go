package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
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
