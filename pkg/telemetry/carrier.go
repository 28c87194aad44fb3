package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Header names of the W3C trace context (https://www.w3.org/TR/trace-context/).
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// Inject writes the trace context of ctx (traceparent, tracestate, baggage)
// into headers, replacing what they held, and returns headers (a new map
// when headers is nil and there is something to write). With no span in
// ctx, or tracing off, headers are returned as they are.
func Inject(ctx context.Context, headers map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return headers
	}
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	if len(carrier) == 0 {
		return headers
	}
	out := make(map[string]string, len(headers)+len(carrier))
	for k, v := range headers {
		out[k] = v
	}
	for k, v := range carrier {
		out[k] = v
	}
	return out
}

// Extract returns ctx carrying the remote trace context stored in headers
// (an outbox row's or a dead letter's), for a span that continues it.
func Extract(ctx context.Context, headers map[string]string) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier(headers))
}
