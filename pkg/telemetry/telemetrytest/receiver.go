package telemetrytest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened.
type Span struct {
	Service  string
	TraceID  string
	SpanID   string
	ParentID string
	Name     string
	// Kind is the OTLP span kind name (SPAN_KIND_SERVER, ...).
	Kind  string
	Attrs map[string]string
	// Links are the trace ids the span links to.
	Links []string
	// Events are the names of the span's events.
	Events []string
}

// Receiver collects the spans exported to it.
type Receiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []Span
}

// Start runs a receiver until t ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the OTEL_EXPORTER_OTLP_ENDPOINT to give exporters (the trace path
// /v1/traces is appended by them).
func (r *Receiver) URL() string { return r.srv.URL }

// Env is the environment that makes a service export to r.
func (r *Receiver) Env() map[string]string {
	return map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": r.srv.URL,
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		// Export promptly: tests wait for spans.
		"OTEL_BSP_SCHEDULE_DELAY": "200",
	}
}

// Spans returns a copy of what was received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer gz.Close()
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range msg.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{Service: service, TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind().String(),
					Attrs: attrs(s.GetAttributes())}
				for _, e := range s.GetEvents() {
					sp.Events = append(sp.Events, e.GetName())
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetTraceId()))
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			m[kv.GetKey()] = v.GetStringValue()
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}
