// Package telemetry sets up OpenTelemetry tracing for an Aegis service from
// the standard OTEL_* environment variables, and carries W3C trace context
// through the places a payment crosses a process boundary without an HTTP
// or Kafka client to do it for us (the outbox row's headers).
//
// It exists so that one payment can be followed across the four services in
// Jaeger or Tempo instead of by grepping correlation ids, and so that every
// service configures tracing the same way: an OTLP exporter (gRPC or
// HTTP/protobuf, OTEL_EXPORTER_OTLP_PROTOCOL) to OTEL_EXPORTER_OTLP_ENDPOINT,
// the sampler of OTEL_TRACES_SAMPLER, the resource of OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES, and the W3C tracecontext and baggage propagators.
//
// Tracing is off unless an exporter is configured (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_TRACES_EXPORTER=otlp): then
// Setup changes nothing, the global provider stays OpenTelemetry's no-op one
// and every instrumented call costs a no-op span.
//
// Setup installs the provider and propagator as OpenTelemetry's globals.
// That is the ecosystem's convention: otelhttp, kotel, otelpgx and redisotel
// all default to them, so a service's wiring needs no provider threaded
// through every constructor. Each service is its own process, so the one
// global is the service's.
package telemetry
