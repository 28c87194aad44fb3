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

// CreatePayout pays a connected account (acct_…): a Transfer to it, final
// when created; where the destination names one of the account's external
// accounts, that transfer (Result.PayoutMissing) and then, asked again
// with req.Transfer set, the connected account's payout to it
// (Stripe-Account), finished later by its payout.paid or payout.failed.
// A bank account or card of the platform's own (a destination registered
// before destinations were Connect accounts) is a platform Payout.
func (s *Stripe) CreatePayout(ctx context.Context, req Request) (Result, error) {
	meta := map[string]string{"payout_id": req.PayoutID}
	money := stripeapi.Money{Amount: req.Amount, Currency: req.Currency}
	switch {
	case !strings.HasPrefix(req.Destination, "acct_"):
		po, err := s.api.CreatePayout(ctx, stripeapi.PayoutRequest{Money: money, Destination: req.Destination,
			Metadata: meta, IdempotencyKey: req.key()})
		if err != nil {
			return Result{}, classifyStripe(err)
		}
		return Result{Reference: po.ID, Status: string(po.Status)}, nil
	case req.Transfer == "":
		tr, err := s.api.CreateTransfer(ctx, stripeapi.TransferRequest{Money: money, Destination: req.Destination,
			TransferGroup: req.PayoutID, Metadata: meta, IdempotencyKey: req.key()})
		if err != nil {
			return Result{}, classifyStripe(err)
		}
		return transferResult(tr, req.ExternalAccount != ""), nil
	}
	meta["transfer"] = req.Transfer
	po, err := s.api.CreatePayout(ctx, stripeapi.PayoutRequest{Money: money, Account: req.Destination,
		Destination: req.ExternalAccount, Metadata: meta, IdempotencyKey: req.key()})
	if err != nil {
		return Result{}, classifyStripe(err)
	}
	return payoutResult(po, req.Transfer), nil
}

// transferResult is what a transfer means for its payout: paid, unless a
// connected account's payout is to follow (twoStep), or reversed whole
// (failed: the money is back in our balance).
func transferResult(tr *stripe.Transfer, twoStep bool) Result {
	res := Result{Reference: tr.ID, Status: "paid", Final: true, Amount: tr.Amount, Currency: string(tr.Currency),
		PayoutID: tr.Metadata["payout_id"]}
	switch {
	case tr.Reversed:
		res.Status, res.Final, res.Failed = "reversed", false, true
	case twoStep:
		res.Transfer, res.Status, res.Final, res.PayoutMissing = tr.ID, "transferred", false, true
	}
	return res
}

// payoutResult is what a Stripe payout means for its payout. On a
// connected account (transfer set) a failed or canceled payout leaves the
// money in that account's balance: not a failure of ours to give back
// (AttentionConnectedPayout).
func payoutResult(po *stripe.Payout, transfer string) Result {
	res := Result{Reference: po.ID, Transfer: transfer, Status: string(po.Status), Amount: po.Amount,
		Currency: string(po.Currency), PayoutID: po.Metadata["payout_id"]}
	switch po.Status {
	case stripe.PayoutStatusPaid:
		res.Final = true
	case stripe.PayoutStatusFailed, stripe.PayoutStatusCanceled:
		if transfer != "" {
			res.Attention = AttentionConnectedPayout
		} else {
			res.Failed = true
		}
	}
	return res
}

// maxLookupObjects bounds a lookup's listing. Stripe cannot filter payouts
// by metadata, so a lookup lists the payouts created since the payout was
// and matches metadata[payout_id]; past this many the answer is "could not
// tell", never "not found".
const maxLookupObjects = 10_000

// FindPayout finds the payout's objects by metadata[payout_id]. Transfers
// are listed by their transfer_group (the payout id); payouts (the
// platform's, or with Stripe-Account the connected account's) by creation
// time, from a minute before l.Since. Stripe lists newest first (its list
// endpoints' documented order); a failed object answers only once the
// listing has no live one for the payout.
//
// For a connected account's external account the transfer is looked up
// first: none is ErrNotFound (nothing was made); found, the connected
// account's payouts are listed, and none there is the transfer with
// PayoutMissing, never ErrNotFound: the money has left our balance, and
// the payout must never be sent as a second transfer.
func (s *Stripe) FindPayout(ctx context.Context, l Lookup) (Result, error) {
	if !strings.HasPrefix(l.Destination, "acct_") {
		return s.findPayout(ctx, l, "", "")
	}
	tr, err := s.findTransfer(ctx, l)
	if errors.Is(err, ErrNotFound) && l.Transfer != "" {
		// Stripe made it: a listing without it proves nothing.
		return Result{}, unknownOutcome("stripe", "transfer "+l.Transfer+" of the payout is not in Stripe's listing", nil)
	}
	if err != nil {
		return Result{}, err
	}
	if l.ExternalAccount == "" || tr.Failed {
		return tr, nil
	}
	po, err := s.findPayout(ctx, l, l.Destination, tr.Reference)
	if errors.Is(err, ErrNotFound) {
		return tr, nil
	}
	return po, err
}

func (s *Stripe) findTransfer(ctx context.Context, l Lookup) (Result, error) {
	since := l.Since.Add(-time.Minute)
	seen := 0
	// found is the best object so far: a live one ends the listing, a
	// failed one is kept while the listing looks for a live one.
	var found *Result
	for tr, err := range s.api.Transfers(ctx, stripeapi.TransferQuery{Since: since, TransferGroup: l.PayoutID}) {
		if err != nil {
			return Result{}, lookupFailed(err)
		}
		if tr.Metadata["payout_id"] == l.PayoutID {
			if found = prefer(found, transferResult(tr, l.ExternalAccount != "")); !dead(*found) {
				return *found, nil
			}
		}
		if seen++; seen >= maxLookupObjects {
			return Result{}, unknownOutcome("stripe", "transfer lookup listed too many transfers", nil)
		}
	}
	return foundOrNot(found)
}

// findPayout lists the payouts of account ("" the platform) for the
// payout's; transfer is the transfer a connected account's payout follows.
func (s *Stripe) findPayout(ctx context.Context, l Lookup, account, transfer string) (Result, error) {
	since := l.Since.Add(-time.Minute)
	seen := 0
	var found *Result
	dest := l.Destination
	if account != "" {
		dest = l.ExternalAccount
	}
	for po, err := range s.api.Payouts(ctx, stripeapi.PayoutQuery{Account: account, Since: since, Destination: dest}) {
		if err != nil {
			return Result{}, lookupFailed(err)
		}
		if po.Metadata["payout_id"] == l.PayoutID {
			if found = prefer(found, payoutResult(po, transfer)); !dead(*found) {
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
	if found == nil || (dead(*found) && !dead(next)) {
		return &next
	}
	return found
}

// dead reports whether an object no longer carries its payout's money
// forward: failed, or a connected account's payout that failed (its money
// is back in that account, where a payout sent again after it may live).
func dead(r Result) bool { return r.Failed || r.Attention == AttentionConnectedPayout }

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
