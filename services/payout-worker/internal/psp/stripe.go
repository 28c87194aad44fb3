package psp

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76"

	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/provider"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
)

// Stripe pays out through Aegis's Stripe client (pkg/stripeapi).
type Stripe struct {
	api *stripeapi.Client
}

// NewStripe returns the payout side of api.
func NewStripe(api *stripeapi.Client) *Stripe { return &Stripe{api: api} }

// Provider is "stripe".
func (s *Stripe) Provider() string { return string(provider.Stripe) }

// CreatePayout creates a Payout to a bank account or card, or a Transfer to a
// connected account (acct_…).
func (s *Stripe) CreatePayout(ctx context.Context, req Request) (Result, error) {
	meta := map[string]string{"payout_id": req.PayoutID}
	money := stripeapi.Money{Amount: req.Amount, Currency: req.Currency}
	if strings.HasPrefix(req.Destination, "acct_") {
		tr, err := s.api.CreateTransfer(ctx, stripeapi.TransferRequest{Money: money, Destination: req.Destination,
			TransferGroup: req.PayoutID, Metadata: meta, IdempotencyKey: req.key()})
		if err != nil {
			return Result{}, classifyStripe(err)
		}
		return Result{Reference: tr.ID, Status: "paid", Final: true}, nil
	}
	po, err := s.api.CreatePayout(ctx, stripeapi.PayoutRequest{Money: money, Destination: req.Destination,
		Metadata: meta, IdempotencyKey: req.key()})
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
	since := l.Since.Add(-time.Minute)
	seen := 0
	// found is the best object so far: a live one ends the listing, a
	// failed one is kept while the listing looks for a live one.
	var found *Result
	if strings.HasPrefix(l.Destination, "acct_") {
		for tr, err := range s.api.Transfers(ctx, stripeapi.TransferQuery{Since: since, TransferGroup: l.PayoutID}) {
			if err != nil {
				return Result{}, lookupFailed(err)
			}
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
		return foundOrNot(found)
	}
	for po, err := range s.api.Payouts(ctx, stripeapi.PayoutQuery{Since: since, Destination: l.Destination}) {
		if err != nil {
			return Result{}, lookupFailed(err)
		}
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
