package psp

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/payout"
	"github.com/stripe/stripe-go/v76/transfer"

	"github.com/aegis-payments/aegis/pkg/errclass"
)

// Stripe pays out through stripe-go v76.
type Stripe struct {
	payouts   payout.Client
	transfers transfer.Client
}

// NewStripe returns a Stripe client for secretKey. apiBase overrides Stripe's
// URL (STRIPE_API_BASE; the local stand-in in dev and tests). stripe-go's own
// retries are off: retries are ours, spaced by our backoff and breaker.
func NewStripe(secretKey, apiBase string, httpClient *http.Client) *Stripe {
	cfg := &stripe.BackendConfig{
		HTTPClient:        httpClient,
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if apiBase != "" {
		cfg.URL = stripe.String(strings.TrimRight(apiBase, "/"))
	}
	b := stripe.GetBackendWithConfig(stripe.APIBackend, cfg)
	return &Stripe{payouts: payout.Client{B: b, Key: secretKey}, transfers: transfer.Client{B: b, Key: secretKey}}
}

// Provider is "stripe".
func (s *Stripe) Provider() string { return "stripe" }

// CreatePayout creates a Payout to a bank account or card, or a Transfer to a
// connected account (acct_…).
func (s *Stripe) CreatePayout(ctx context.Context, req Request) (Result, error) {
	meta := map[string]string{"payout_id": req.PayoutID}
	if strings.HasPrefix(req.Destination, "acct_") {
		params := &stripe.TransferParams{
			Amount: stripe.Int64(req.Amount), Currency: stripe.String(req.Currency),
			Destination: stripe.String(req.Destination), TransferGroup: stripe.String(req.PayoutID),
		}
		params.Context = ctx
		params.Metadata = meta
		params.SetIdempotencyKey(IdempotencyKey(req.PayoutID))
		tr, err := s.transfers.New(params)
		if err != nil {
			return Result{}, classifyStripe(err)
		}
		return Result{Reference: tr.ID, Status: "paid", Final: true}, nil
	}
	params := &stripe.PayoutParams{
		Amount: stripe.Int64(req.Amount), Currency: stripe.String(req.Currency),
		Destination: stripe.String(req.Destination),
	}
	params.Context = ctx
	params.Metadata = meta
	params.SetIdempotencyKey(IdempotencyKey(req.PayoutID))
	po, err := s.payouts.New(params)
	if err != nil {
		return Result{}, classifyStripe(err)
	}
	return Result{Reference: po.ID, Status: string(po.Status)}, nil
}

func classifyStripe(err error) error {
	var se *stripe.Error
	if !errors.As(err, &se) {
		return classifyTransport("stripe", err)
	}
	e := &Error{Provider: "stripe", Status: se.HTTPStatusCode, Code: string(se.Code), Message: se.Msg, cause: err}
	if e.Code == "" {
		e.Code = string(se.Type)
	}
	var retryAfter string
	if se.LastResponse != nil {
		retryAfter = se.LastResponse.Header.Get("Retry-After")
	}
	if se.Type == stripe.ErrorTypeIdempotency && se.HTTPStatusCode == http.StatusBadRequest {
		// Same key, different parameters: a bug on our side, never retry.
		return errclass.AsPermanent(e)
	}
	return classifyHTTP(e, parseRetryAfter(retryAfter))
}
