package httpserver_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-payments/aegis/pkg/httpserver"
)

// With tracing on (as telemetry.Setup installs it), a request is a server
// span continuing the caller's traceparent, named by its chi route, with
// the correlation id; the handler's context holds it; probes and scrapes are
// not traced.
func TestRouterTracesRequests(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})

	r := httpserver.NewRouter(slog.New(slog.NewJSONHandler(io.Discard, nil)), httpserver.NewRegistry())
	var inHandler trace.SpanContext
	r.Get("/v1/traced/{id}", func(w http.ResponseWriter, req *http.Request) {
		inHandler = trace.SpanContextFromContext(req.Context())
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(r)
	defer srv.Close()

	const parentTrace, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/traced/42", nil)
	require.NoError(t, err)
	req.Header.Set("traceparent", "00-"+parentTrace+"-"+parentSpan+"-01")
	req.Header.Set(httpserver.HeaderCorrelationID, "corr-traced")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get(srv.URL + p)
		require.NoError(t, err)
		resp.Body.Close()
	}

	var mine []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindServer {
			mine = append(mine, s)
		}
	}
	require.Len(t, mine, 1, "one server span: the ops endpoints are not traced")
	s := mine[0]
	require.Equal(t, "GET /v1/traced/{id}", s.Name())
	require.Equal(t, parentTrace, s.SpanContext().TraceID().String())
	require.Equal(t, parentSpan, s.Parent().SpanID().String())
	require.Equal(t, s.SpanContext().SpanID(), inHandler.SpanID(), "the handler runs in the request's span")
	attrs := map[string]string{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	require.Equal(t, "corr-traced", attrs[httpserver.AttrCorrelationID])
	require.Equal(t, "/v1/traced/{id}", attrs["http.route"])
}

// BenchmarkTraceOff is the cost of the tracing middleware when tracing is
// off (no provider installed): run with -run '^$' so no test installs one.
func BenchmarkTraceOff(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"bare", ok}, {"trace-off", httpserver.Trace(ok)}, {"otelhttp-noop", otelhttp.NewHandler(ok, "x")}} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/v1/x", nil)
			b.ReportAllocs()
			for b.Loop() {
				c.h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}
