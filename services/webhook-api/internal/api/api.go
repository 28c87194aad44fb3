package api

import (
	"bytes"
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

	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/clients"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/destinations"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/payouts"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/validation"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/verify"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/wallets"
)

// MaxWebhookBody is the largest webhook body accepted (docs/design/contract.md, "HTTP APIs").
const MaxWebhookBody = 1 << 20

// maxRequestBody bounds /v1 request bodies.
const maxRequestBody = 64 << 10

// Saver commits verified webhooks (an ingest.Committer, or an ingest.Store).
// Save may refuse with ingest.ErrOverloaded (503 with Retry-After).
type Saver interface {
	Save(ctx context.Context, p ingest.Pending) (ingest.Saved, error)
}

// fuller is a Saver with admission control (ingest.Committer): Full
// reports that Save would refuse with ingest.ErrOverloaded.
type fuller interface{ Full() bool }

// Deps is what the API needs.
type Deps struct {
	Logger       *slog.Logger
	Ingest       Saver
	Payouts      *payouts.Store
	Destinations *destinations.Store
	// Checker asks a destination's PSP about it before it is registered.
	Checker  destinations.Checker
	Wallets  *wallets.Store
	Stripe   *verify.Stripe
	Paystack *verify.Paystack
	// Clients are API_TOKENS: who may call /v1, and for which users.
	Clients *clients.Set
	// Webhooks counts webhooks by provider and outcome (NewWebhookMetric).
	Webhooks *prometheus.CounterVec
	// Refused counts and logs webhooks refused for their signature.
	Refused *RefusalLog
	// Shed counts and logs webhooks shed for overload (nil: counted nowhere).
	Shed *ShedLog
	// Reading bounds the memory of webhook bodies being read and verified
	// (NewReading; nil: unbounded, for tests that do not need it).
	Reading *Reading
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
		r.Post("/payouts/{id}/cancel", a.cancelPayout)
		r.Get("/wallets/{user_id}", a.getWallet)
		r.Post("/users/{user_id}/destinations", a.registerDestination)
		r.Get("/users/{user_id}/destinations", a.listDestinations)
		r.Post("/users/{user_id}/destinations/{destination_id}/disable", a.disableDestination)
	})
}

type (
	verifyFunc    func(body []byte, header string) error
	normalizeFunc func(body []byte, now time.Time) (ingest.Normalized, error)
)

func (a *api) webhook(provider, sigHeader string, verifyBody verifyFunc, normalize normalizeFunc) http.HandlerFunc {
	full, _ := a.Ingest.(fuller)
	return func(w http.ResponseWriter, r *http.Request) {
		// Shed before reading, verifying and decoding a body that could
		// only be refused: under overload, CPU goes to the webhooks that
		// will be committed.
		if full != nil && full.Full() {
			a.shed(w, r, provider)
			return
		}
		body, release, err := a.Reading.read(w, r, MaxWebhookBody)
		if errors.Is(err, errReadingFull) {
			a.Reading.refused.WithLabelValues(provider).Inc()
			// The answer goes out at once and the connection is closed:
			// the rest of a slow upload is not waited for.
			w.Header().Set("Connection", "close")
			a.fail(w, r, err)
			return
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		err = verifyBody(body, r.Header.Get(sigHeader))
		// Verified, the body is the PSP's and goes on to the commit line
		// (bounded by its admission); refused, it is garbage.
		release()
		if err != nil {
			a.refused(w, r, provider, err)
			return
		}
		n, err := normalize(body, a.Now())
		if errors.Is(err, ingest.ErrFromTheFuture) {
			a.refused(w, r, provider, err)
			return
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		saved, err := a.Ingest.Save(r.Context(), ingest.Pending{Event: n, Body: body, CorrelationID: logging.CorrelationID(r.Context())})
		if errors.Is(err, ingest.ErrOverloaded) {
			a.shed(w, r, provider)
			return
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		outcome := saved.Outcome
		a.Webhooks.WithLabelValues(provider, string(outcome)).Inc()
		attrs := []any{"provider", provider, "event_id", saved.EventID, "event_type", clipForLog(n.Event.Type), "outcome", string(outcome)}
		switch outcome {
		case ingest.DeadLettered:
			a.Logger.WarnContext(r.Context(), "webhook stored and dead-lettered", append(attrs, "reason", saved.Reason)...)
		case ingest.Accepted:
			// The common case is in webhook_events (with its correlation id)
			// and in aegis_webhooks_total; a line per webhook at thousands a
			// second would cost the log pipeline more than it tells.
			a.Logger.DebugContext(r.Context(), "webhook stored", attrs...)
		default:
			a.Logger.InfoContext(r.Context(), "webhook stored", attrs...)
		}
		httpserver.WriteJSON(w, http.StatusOK, map[string]string{"status": string(outcome), "event_id": saved.EventID})
	}
}

// shed answers a webhook refused because the commit line is full: 503
// overloaded with Retry-After, counted, and logged at most once per
// interval (ShedLog).
func (a *api) shed(w http.ResponseWriter, r *http.Request, provider string) {
	a.Shed.Shed(r.Context(), provider)
	a.fail(w, r, ingest.ErrOverloaded)
}

// refused answers a webhook refused for its signature or timestamp, counted
// and logged at most once per interval (RefusalLog).
func (a *api) refused(w http.ResponseWriter, r *http.Request, provider string, err error) {
	_, code, _ := classify(err)
	if !errors.Is(err, verify.ErrNotConfigured) {
		a.Refused.Refused(r.Context(), provider, code, r.RemoteAddr)
	}
	a.fail(w, r, err)
}

// clipForLog bounds a PSP-supplied string in a log line.
func clipForLog(s string) string {
	if len(s) > 128 {
		return s[:128] + "…"
	}
	return s
}

func (a *api) authenticate(next http.Handler) http.Handler {
	return a.Clients.Middleware(func(w http.ResponseWriter, r *http.Request) { a.fail(w, r, errUnauthorized) })(next)
}

// client is the request's API client (authenticate put it there).
func client(r *http.Request) clients.Client {
	c, _ := clients.FromContext(r.Context())
	return c
}

// inScope answers 403 and reports false when the request's client may not
// act for userID. It runs before anything is read or written for the user.
func (a *api) inScope(w http.ResponseWriter, r *http.Request, userID string) bool {
	c := client(r)
	if c.Scope.Allows(userID) {
		return true
	}
	a.Logger.WarnContext(r.Context(), "request outside the client's scope refused", "client", c.Name,
		"route", r.URL.Path, "scope", c.Scope.String())
	a.fail(w, r, errOutOfScope)
	return false
}

func (a *api) createPayout(w http.ResponseWriter, r *http.Request) {
	c := client(r)
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if key == "" || len(key) > 255 || strings.IndexFunc(key, notPrintableASCII) >= 0 {
		a.fail(w, r, errIdempotencyKey)
		return
	}
	var req payouts.Request
	if err := decodeBody(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := req.Normalize(a.ProviderEnabled); err != nil {
		a.fail(w, r, err)
		return
	}
	if !a.inScope(w, r, req.UserID) {
		return
	}
	p, created, err := a.Payouts.Create(r.Context(), c.Name, key, req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.Logger.InfoContext(r.Context(), "payout accepted", "payout_id", p.ID, "client", c.Name,
		"created", created, "status", p.Status, "provider", p.Provider, "destination_id", p.DestinationID)
	httpserver.WriteJSON(w, http.StatusAccepted, map[string]string{"payout_id": p.ID, "status": p.Status})
}

func notPrintableASCII(r rune) bool { return r < 0x20 || r > 0x7e }

func (a *api) getPayout(w http.ResponseWriter, r *http.Request) {
	p, err := a.Payouts.Get(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !a.inScope(w, r, p.UserID) {
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, p)
}

// cancelPayout cancels a payout the worker has not taken up yet: 200 with
// the payout (FINALIZED, class canceled), again for a repeat, 409 once it
// is being sent.
func (a *api) cancelPayout(w http.ResponseWriter, r *http.Request) {
	p, err := a.Payouts.Get(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !a.inScope(w, r, p.UserID) {
		return
	}
	c := client(r)
	p, err = a.Payouts.Cancel(r.Context(), c.Name, p.ID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.Logger.InfoContext(r.Context(), "payout canceled", "payout_id", p.ID, "client", c.Name)
	httpserver.WriteJSON(w, http.StatusOK, p)
}

func (a *api) registerDestination(w http.ResponseWriter, r *http.Request) {
	userID := chi.URLParam(r, "user_id")
	var reg destinations.Registration
	if err := decodeBody(w, r, &reg); err != nil {
		a.fail(w, r, err)
		return
	}
	kind, err := reg.Normalize(userID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !a.inScope(w, r, userID) {
		return
	}
	c := client(r)
	// An active registration answers itself without asking the PSP again;
	// a new one is registered only once its PSP confirmed it.
	d, ok, err := a.Destinations.Active(r.Context(), userID, reg)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	created := false
	if !ok {
		found, err := a.Checker.Check(r.Context(), reg)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if d, created, err = a.Destinations.Register(r.Context(), c.Name, userID, kind, reg, found); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		a.Logger.InfoContext(r.Context(), "destination registered", "destination_id", d.ID, "client", c.Name,
			"provider", d.Provider, "type", d.Type)
	}
	httpserver.WriteJSON(w, status, d)
}

func (a *api) listDestinations(w http.ResponseWriter, r *http.Request) {
	userID := chi.URLParam(r, "user_id")
	status := r.URL.Query().Get("status")
	if status != "" && status != destinations.StatusActive && status != destinations.StatusDisabled {
		a.fail(w, r, &validation.Error{Field: "status", Message: `must be "active" or "disabled"`})
		return
	}
	if !a.inScope(w, r, userID) {
		return
	}
	items, err := a.Destinations.List(r.Context(), userID, status)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if items == nil {
		items = []destinations.Destination{}
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (a *api) disableDestination(w http.ResponseWriter, r *http.Request) {
	userID := chi.URLParam(r, "user_id")
	if !a.inScope(w, r, userID) {
		return
	}
	c := client(r)
	d, err := a.Destinations.Disable(r.Context(), c.Name, userID, chi.URLParam(r, "destination_id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.Logger.InfoContext(r.Context(), "destination disabled", "destination_id", d.ID, "client", c.Name)
	httpserver.WriteJSON(w, http.StatusOK, d)
}

func (a *api) getWallet(w http.ResponseWriter, r *http.Request) {
	userID := chi.URLParam(r, "user_id")
	if !a.inScope(w, r, userID) {
		return
	}
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			a.fail(w, r, &validation.Error{Field: "limit", Message: "must be between 1 and 500"})
			return
		}
		limit = n
	}
	currency := strings.ToLower(r.URL.Query().Get("currency"))
	wal, err := a.Wallets.Get(r.Context(), userID, currency, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, wal)
}

// decodeBody reads one JSON object into v, refusing unknown fields and
// trailing data.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r, maxRequestBody)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", errBadJSON, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after the JSON object", errBadJSON)
	}
	return nil
}

// readBody reads at most limit bytes; a larger body is an error mapped to 413.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", errBadJSON, err)
	}
	return body, nil
}
