package telemetry_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-payments/aegis/pkg/telemetry"
	"github.com/aegis-payments/aegis/pkg/telemetry/telemetrytest"
)

// With no OTEL_* variable set, tracing is off: Setup installs nothing,
// spans do not record, nothing is written into outbox headers, nothing
// reaches a receiver, and Shutdown is harmless.
func TestOffWhenUnset(t *testing.T) {
	rcv := telemetrytest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf") // not enough on its own
	before := otel.GetTracerProvider()
	tel, err := telemetry.Setup(context.Background(), "webhook-api", func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_SERVICE_NAME": "x"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Enabled() {
		t.Fatal("tracing must be off without an exporter endpoint")
	}
	if otel.GetTracerProvider() != before || telemetry.On() {
		t.Fatal("Setup must leave the global tracer provider alone when off")
	}
	ctx, span := otel.Tracer("test").Start(context.Background(), "work")
	if span.IsRecording() {
		t.Fatal("a span recorded with tracing off")
	}
	span.End()
	h := map[string]string{"event_type": "x"}
	if got := telemetry.Inject(ctx, h); len(got) != 1 || got["event_type"] != "x" {
		t.Fatalf("Inject with tracing off changed the headers: %v", got)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rcv.Spans()); n != 0 {
		t.Fatalf("%d spans exported with tracing off", n)
	}
	var none *telemetry.Telemetry
	if none.Enabled() || none.Shutdown(context.Background()) != nil {
		t.Fatal("a nil Telemetry is off")
	}
}

func TestRefusesUnknownExporterAndProtocol(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_TRACES_EXPORTER": "zipkin"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
	} {
		if _, err := telemetry.Setup(context.Background(), "x", func(k string) string { return env[k] }); err == nil {
			t.Errorf("%v: want an error", env)
		}
	}
	for _, env := range []map[string]string{
		{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
	} {
		tel, err := telemetry.Setup(context.Background(), "x", func(k string) string { return env[k] })
		if err != nil || tel.Enabled() {
			t.Errorf("%v: want tracing off, got enabled=%v err=%v", env, tel.Enabled(), err)
		}
	}
}

// With an endpoint, spans go to it over OTLP with the service's name, and
// the trace context written into headers is read back as the same trace.
func TestExportsAndPropagates(t *testing.T) {
	rcv := telemetrytest.Start(t)
	env := rcv.Env()
	for k, v := range env {
		t.Setenv(k, v) // the exporter reads the process environment
	}
	tel, err := telemetry.Setup(context.Background(), "outbox-relay", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !tel.Enabled() || !telemetry.On() || tel.Exporter != "otlp http/protobuf" {
		t.Fatalf("want otlp http/protobuf, got %q", tel.Exporter)
	}
	ctx, parent := otel.Tracer("test").Start(context.Background(), "request")
	headers := telemetry.Inject(ctx, map[string]string{"event_type": "x"})
	parent.End()
	if headers["traceparent"] == "" || headers["event_type"] != "x" {
		t.Fatalf("headers: %v", headers)
	}
	_, child := otel.Tracer("test").Start(telemetry.Extract(context.Background(), headers), "publish")
	child.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) != 2 {
		t.Fatalf("want 2 spans, got %+v", spans)
	}
	byName := map[string]telemetrytest.Span{}
	for _, s := range spans {
		byName[s.Name] = s
		if s.Service != "outbox-relay" {
			t.Errorf("span %s from service %q", s.Name, s.Service)
		}
	}
	if byName["publish"].TraceID != byName["request"].TraceID || byName["publish"].ParentID != byName["request"].SpanID {
		t.Fatalf("publish is not a child of request: %+v", spans)
	}
	if !trace.SpanContextFromContext(telemetry.Extract(context.Background(), headers)).IsRemote() {
		t.Fatal("extracted context is not remote")
	}
}
