package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/bearer"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/payouts"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/verify"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/wallets"
)

// MaxWebhookBody is the largest webhook body accepted (CONTRACT.md).
const MaxWebhookBody = 1 << 20

// maxRequestBody bounds /v1 request bodies.
const maxRequestBody = 64 << 10

// Saver commits verified webhooks (an ingest.Committer, or an ingest.Store).
type Saver interface {
	Save(ctx context.Context, p ingest.Pending) (ingest.Outcome, error)
}

// Deps is what the API needs.
type Deps struct {
	Logger   *slog.Logger
	Ingest   Saver
	Payouts  *payouts.Store
	Wallets  *wallets.Store
	Stripe   *verify.Stripe
	Paystack *verify.Paystack
	Tokens   *bearer.Set
	// Webhooks counts webhooks by provider and outcome (NewWebhookMetric).
	Webhooks *prometheus.CounterVec
	// ProviderEnabled reports whether payouts through a provider are accepted.
	ProviderEnabled func(provider string) bool
	Now             func() time.Time
}

type api struct{ Deps }

// NewWebhookMetric registers aegis_webhooks_total on reg.
func NewWebhookMetric(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aegis_webhooks_total",
		Help: "Verified webhooks by provider and outcome (accepted, duplicate, stale, dead_lettered).",
	}, []string{"provider", "outcome"})
	reg.MustRegister(c)
	return c
}

// Mount adds the routes to r.
func Mount(r chi.Router, d Deps) {
	a := &api{d}
	r.Post("/webhooks/stripe", a.webhook(ingest.Stripe, "Stripe-Signature", d.Stripe.Verify, ingest.NormalizeStripe))
	r.Post("/webhooks/paystack", a.webhook(ingest.Paystack, "X-Paystack-Signature", d.Paystack.Verify, ingest.NormalizePaystack))
	r.Route("/v1", func(r chi.Router) {
		r.Use(a.authenticate)
		r.Post("/payouts", a.createPayout)
		r.Get("/payouts/{id}", a.getPayout)
		r.Get("/wallets/{user_id}", a.getWallet)
	})
}

type (
	verifyFunc    func(body []byte, header string) error
	normalizeFunc func(body []byte, now time.Time) (ingest.Normalized, error)
)

func (a *api) webhook(provider, sigHeader string, verifyBody verifyFunc, normalize normalizeFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(w, r, MaxWebhookBody)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if err := verifyBody(body, r.Header.Get(sigHeader)); err != nil {
			a.Logger.WarnContext(r.Context(), "webhook refused", "provider", provider, "reason", err.Error())
			a.fail(w, r, err)
			return
		}
		n, err := normalize(body, a.Now())
		if err != nil {
			a.fail(w, r, err)
			return
		}
		outcome, err := a.Ingest.Save(r.Context(), ingest.Pending{Event: n, Body: body, CorrelationID: logging.CorrelationID(r.Context())})
		if err != nil {
			a.fail(w, r, err)
			return
		}
		a.Webhooks.WithLabelValues(provider, string(outcome)).Inc()
		attrs := []any{"provider", provider, "event_id", n.Event.EventID, "event_type", n.Event.Type, "outcome", string(outcome)}
		switch {
		case n.Problem != "":
			a.Logger.WarnContext(r.Context(), "webhook stored and dead-lettered", append(attrs, "reason", n.Problem)...)
		case outcome == ingest.Accepted:
			// The common case is in webhook_events (with its correlation id)
			// and in aegis_webhooks_total; a line per webhook at thousands a
			// second would cost the log pipeline more than it tells.
			a.Logger.DebugContext(r.Context(), "webhook stored", attrs...)
		default:
			a.Logger.InfoContext(r.Context(), "webhook stored", attrs...)
		}
		httpserver.WriteJSON(w, http.StatusOK, map[string]string{"status": string(outcome), "event_id": n.Event.EventID})
	}
}

func (a *api) authenticate(next http.Handler) http.Handler {
	return a.Tokens.Middleware(func(w http.ResponseWriter, r *http.Request) { a.fail(w, r, errUnauthorized) })(next)
}

func (a *api) createPayout(w http.ResponseWriter, r *http.Request) {
	tok, _ := bearer.FromContext(r.Context())
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if key == "" || len(key) > 255 {
		a.fail(w, r, errIdempotencyKey)
		return
	}
	body, err := readBody(w, r, maxRequestBody)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var req payouts.Request
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		a.fail(w, r, fmt.Errorf("%w: %v", errBadJSON, err))
		return
	}
	if dec.More() {
		a.fail(w, r, fmt.Errorf("%w: trailing data after the JSON object", errBadJSON))
		return
	}
	if err := req.Normalize(a.ProviderEnabled); err != nil {
		a.fail(w, r, err)
		return
	}
	p, created, err := a.Payouts.Create(r.Context(), tok.Name, key, req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.Logger.InfoContext(r.Context(), "payout accepted", "payout_id", p.ID, "client", tok.Name,
		"created", created, "status", p.Status, "provider", p.Provider)
	httpserver.WriteJSON(w, http.StatusAccepted, map[string]string{"payout_id": p.ID, "status": p.Status})
}

func (a *api) getPayout(w http.ResponseWriter, r *http.Request) {
	p, err := a.Payouts.Get(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, p)
}

func (a *api) getWallet(w http.ResponseWriter, r *http.Request) {
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			a.fail(w, r, &payouts.ValidationError{Field: "limit", Message: "must be between 1 and 500"})
			return
		}
		limit = n
	}
	currency := strings.ToLower(r.URL.Query().Get("currency"))
	wal, err := a.Wallets.Get(r.Context(), chi.URLParam(r, "user_id"), currency, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, wal)
}

// readBody reads at most limit bytes; a larger body is an error mapped to 413.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", errBadJSON, err)
	}
	return body, nil
}
