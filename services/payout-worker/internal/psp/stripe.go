package psp

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/payout"
	"github.com/stripe/stripe-go/v76/transfer"

	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/provider"
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
func (s *Stripe) Provider() string { return string(provider.Stripe) }

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
		params.SetIdempotencyKey(req.key())
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
	params.SetIdempotencyKey(req.key())
	po, err := s.payouts.New(params)
	if err != nil {
		return Result{}, classifyStripe(err)
	}
	return Result{Reference: po.ID, Status: string(po.Status)}, nil
}

// maxLookupObjects bounds a lookup's listing. Stripe cannot filter payouts
// by metadata, so a lookup lists the payouts created since the payout was
// and matches metadata[payout_id]; past this many the answer is "could not
// tell", never "not found".
const maxLookupObjects = 10_000

// FindPayout finds the Payout or Transfer whose metadata[payout_id] is the
// payout id. Transfers are listed by their transfer_group (the payout id);
// payouts by creation time, from a minute before l.Since. Stripe lists
// newest first (its list endpoints' documented order); a failed object
// answers only once the listing has no live one for the payout.
func (s *Stripe) FindPayout(ctx context.Context, l Lookup) (Result, error) {
	since := stripe.Int64(l.Since.Add(-time.Minute).Unix())
	seen := 0
	// found is the best object so far: a live one ends the listing, a
	// failed one is kept while the listing looks for a live one.
	var found *Result
	if strings.HasPrefix(l.Destination, "acct_") {
		params := &stripe.TransferListParams{TransferGroup: stripe.String(l.PayoutID),
			CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: *since}}
		params.Context = ctx
		params.Limit = stripe.Int64(100)
		it := s.transfers.List(params)
		for it.Next() {
			tr := it.Transfer()
			if tr.Metadata["payout_id"] == l.PayoutID {
				res := Result{Reference: tr.ID, Status: "paid", Final: true, Amount: tr.Amount, Currency: string(tr.Currency),
					PayoutID: tr.Metadata["payout_id"]}
				if tr.Reversed {
					res.Status, res.Final, res.Failed = "reversed", false, true
				}
				if found = prefer(found, res); !found.Failed {
					return *found, nil
				}
			}
			if seen++; seen >= maxLookupObjects {
				return Result{}, unknownOutcome("stripe", "transfer lookup listed too many transfers", nil)
			}
		}
		if err := it.Err(); err != nil {
			return Result{}, lookupFailed(err)
		}
		return foundOrNot(found)
	}
	params := &stripe.PayoutListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: *since}}
	if l.Destination != "" {
		params.Destination = stripe.String(l.Destination)
	}
	params.Context = ctx
	params.Limit = stripe.Int64(100)
	it := s.payouts.List(params)
	for it.Next() {
		po := it.Payout()
		if po.Metadata["payout_id"] == l.PayoutID {
			res := Result{Reference: po.ID, Status: string(po.Status), Amount: po.Amount, Currency: string(po.Currency),
				PayoutID: po.Metadata["payout_id"]}
			switch po.Status {
			case stripe.PayoutStatusPaid:
				res.Final = true
			case stripe.PayoutStatusFailed, stripe.PayoutStatusCanceled:
				res.Failed = true
			}
			if found = prefer(found, res); !found.Failed {
				return *found, nil
			}
		}
		if seen++; seen >= maxLookupObjects {
			return Result{}, unknownOutcome("stripe", "payout lookup listed too many payouts", nil)
		}
	}
	if err := it.Err(); err != nil {
		return Result{}, lookupFailed(err)
	}
	return foundOrNot(found)
}

// prefer keeps the first object found unless it failed and next did not:
// a payout sent again under a new key can have a failed object and a live
// one, and the live one is what the payout's money follows (a lookup that
// answered the failed one would let the hold be released while the PSP
// pays the other).
func prefer(found *Result, next Result) *Result {
	if found == nil || (found.Failed && !next.Failed) {
		return &next
	}
	return found
}

func foundOrNot(found *Result) (Result, error) {
	if found == nil {
		return Result{}, ErrNotFound
	}
	return *found, nil
}

// lookupFailed classifies a failed lookup: whatever the PSP said, the
// payout's outcome stays unknown.
func lookupFailed(err error) error {
	err = classifyStripe(err)
	var e *Error
	if errors.As(err, &e) {
		e.Unknown = true
	}
	return err
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
