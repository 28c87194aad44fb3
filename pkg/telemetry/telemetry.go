package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// Telemetry is a service's tracing set up by Setup.
type Telemetry struct {
	provider *sdktrace.TracerProvider
	// Exporter names what spans are sent with ("otlp grpc" or "otlp
	// http/protobuf"), or "" when tracing is off.
	Exporter string
}

// Enabled reports whether spans are recorded and exported.
func (t *Telemetry) Enabled() bool { return t != nil && t.provider != nil }

// Setup reads the OTEL_* variables through getenv. With no exporter
// configured it returns a Telemetry that is off and touches nothing global.
// Otherwise it builds an OTLP exporter, a batching tracer provider for
// service (OTEL_SERVICE_NAME overrides the name) and installs it and the
// W3C propagators as OpenTelemetry's globals. Call Shutdown before exit.
//
// The OTLP exporters and the SDK read their own settings (endpoint, headers,
// timeout, sampler, resource attributes) from the process environment, as
// every OpenTelemetry SDK does; getenv only decides whether and how to
// start:
//
//	OTEL_EXPORTER_OTLP_ENDPOINT         the OTLP collector spans are sent to, e.g. http://otel-collector:4317;
//	                                    unset (and no exporter named): tracing is off. The SDK itself also reads
//	                                    OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _CERTIFICATE and _INSECURE,
//	                                    OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER(_ARG)
//	                                    (default parentbased_always_on) and OTEL_BSP_* as its documentation says
//	OTEL_EXPORTER_OTLP_TRACES_ENDPOINT  the same for traces only; wins over OTEL_EXPORTER_OTLP_ENDPOINT
//	OTEL_TRACES_EXPORTER                otlp turns tracing on with the SDK's default endpoint; none turns it off
//	OTEL_SDK_DISABLED                   true turns tracing off whatever else is set
//	OTEL_EXPORTER_OTLP_PROTOCOL         grpc (the default, port 4317) or http/protobuf (port 4318)
//	OTEL_EXPORTER_OTLP_TRACES_PROTOCOL  the same for traces only; wins over OTEL_EXPORTER_OTLP_PROTOCOL
func Setup(ctx context.Context, service string, getenv func(string) string) (*Telemetry, error) {
	exporter := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") + getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	switch {
	case strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true"):
		return &Telemetry{}, nil
	case exporter == "none":
		return &Telemetry{}, nil
	case exporter == "" && endpoint == "":
		return &Telemetry{}, nil
	case exporter != "" && exporter != "otlp":
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: Aegis exports traces with otlp (or none)", exporter)
	}
	protocol := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if protocol == "" {
		protocol = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	if protocol == "" {
		protocol = "grpc"
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch protocol {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: want grpc or http/protobuf", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	// Later options win: the service's own name, then what the environment
	// says (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME).
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	// The sampler is the SDK's default: OTEL_TRACES_SAMPLER and
	// OTEL_TRACES_SAMPLER_ARG, else parentbased_always_on.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return &Telemetry{provider: tp, Exporter: "otlp " + protocol}, nil
}

// On reports whether Setup (or a test) installed an SDK tracer provider as
// OpenTelemetry's global in this process. Instrumentation that costs
// something even with the no-op provider (otelhttp's middleware, kotel's
// hooks: attributes built per request or record) is installed only when it
// is on, so tracing off costs nothing.
func On() bool {
	_, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	return ok
}

// Shutdown exports the spans still buffered and stops the provider, giving
// up when ctx is done. It does nothing when tracing is off.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}
