package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// ChildOnly returns a provider whose tracers start spans only inside a
// trace someone else started (a request, a consumed record, a replay);
// elsewhere they return a non-recording span. Client instrumentation (pgx,
// Redis) is given it so that background loops (the relay's polls, the
// outbox notifier, readiness pings) do not open a new root trace per
// statement, several a second per replica, drowning the traces of payments.
// (otelpgx needs no wrapper: it records only under a recording span.)
func ChildOnly(tp trace.TracerProvider) trace.TracerProvider { return childOnlyProvider{tp: tp} }

type childOnlyProvider struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (p childOnlyProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childOnlyTracer{t: p.tp.Tracer(name, opts...)}
}

type childOnlyTracer struct {
	embedded.Tracer
	t trace.Tracer
}

func (t childOnlyTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return noop.NewTracerProvider().Tracer("").Start(ctx, name, opts...)
	}
	return t.t.Start(ctx, name, opts...)
}
