package deliver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aegis-payments/aegis/pkg/event"
)

// Each attempt is a span in the event's trace: a child of the traceparent
// its Kafka record carried, one span per attempt.
func TestEachAttemptIsASpanInTheEventsTrace(t *testing.T) {
	// pkg/telemetry sets this propagator when tracing is on.
	otel.SetTextMapPropagator(propagation.TraceContext{})
	h := newHarness(t)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	h.addEndpoint(rc.srv.URL, endpointOpts{})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h.startTraced(h.config(nil), nil, tp, "intake", "dispatch")

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	e := payout("wyn", event.TypePayoutSucceeded)
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.kafka.ProduceSync(ctx, &kgo.Record{Key: []byte("wyn"), Value: b,
		Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-" + traceID + "-" + parentID + "-01")}}}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	h.eventually("delivered on the second attempt", 20*time.Second, func() bool {
		return h.count(`SELECT count(*) FROM outbound_deliveries WHERE state = 'succeeded' AND attempts = 2`) == 1
	})
	h.eventually("two spans ended", 5*time.Second, func() bool { return len(rec.Ended()) >= 2 })
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want one per attempt", len(spans))
	}
	for _, s := range spans {
		if s.Name() != "outbound attempt" || s.SpanContext().TraceID().String() != traceID ||
			s.Parent().SpanID().String() != parentID {
			t.Errorf("span %q in trace %s under %s, want a child of %s in %s", s.Name(), s.SpanContext().TraceID(),
				s.Parent().SpanID(), parentID, traceID)
		}
	}
}
