package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/api"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/clients"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/verify"
)

// acceptAll is a Saver that commits nothing: the benchmark measures the
// request path up to the commit.
type acceptAll struct{}

func (acceptAll) Save(_ context.Context, p ingest.Pending) (ingest.Saved, error) {
	return ingest.Saved{Outcome: ingest.Accepted, EventID: p.Event.Event.EventID}, nil
}

// BenchmarkStripeWebhookPath is the CPU of one webhook through the router,
// middleware, verification and normalisation, without the commit (go test
// -bench StripeWebhookPath -cpuprofile; make bench measures throughput).
func BenchmarkStripeWebhookPath(b *testing.B) {
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	reg := httpserver.NewRegistry()
	r := httpserver.NewRouter(logger, reg)
	set, _ := clients.Parse(testClients)
	api.Mount(r, api.Deps{Logger: logger, Ingest: acceptAll{}, Stripe: verify.NewStripe([]string{stripeSecret}),
		Paystack: verify.NewPaystack(paystackSecret), Clients: set, Webhooks: api.NewWebhookMetric(reg),
		Refused: api.NewRefusalLog(logger, reg, time.Minute, time.Now), Reading: api.NewReading(api.DefaultReadingMax, reg), Now: time.Now})
	bodies := make([][]byte, 1024)
	sigs := make([]string, len(bodies))
	for i := range bodies {
		bodies[i] = paymentIntent(fmt.Sprintf("evt_bench_%d", i), "user-1", 5000)
		sigs[i] = verify.SignStripe(stripeSecret, bodies[i], time.Now())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		n := i % len(bodies)
		req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", bytes.NewReader(bodies[n]))
		req.Header.Set("Stripe-Signature", sigs[n])
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("answered %d: %s", w.Code, w.Body)
		}
	}
}
