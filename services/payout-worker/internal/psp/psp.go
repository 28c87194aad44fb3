package psp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/aegis-payments/aegis/pkg/breaker"
	"github.com/aegis-payments/aegis/pkg/errclass"
)

// Request is one payout to send.
type Request struct {
	PayoutID    string
	Amount      int64
	Currency    string
	Destination string
	// ExternalAccount is, for a Stripe connected account (Destination
	// acct_…), the bank account or card of its own to pay out to: the
	// payout is then a Transfer to the account and a payout on it. "" for
	// a transfer alone.
	ExternalAccount string
	// Transfer is the Stripe transfer already made for the payout: the
	// request is then the connected account's payout alone. A transfer is
	// never sent twice for a payout once one exists.
	Transfer string
	// IdempotencyKey is the attempt's key; "" means IdempotencyKey(PayoutID).
	IdempotencyKey string
}

// ConnectedPayoutKey is the Idempotency-Key of the connected account's
// payout sent under payout key key (AttemptKey): the transfer and the
// payout are two objects and never share a key.
func ConnectedPayoutKey(key string) string { return key + "-payout" }

func (r Request) key() string {
	if r.IdempotencyKey != "" {
		return r.IdempotencyKey
	}
	return IdempotencyKey(r.PayoutID)
}

// IdempotencyKey is the first key of a payout: every call carries it until
// a lookup shows that the PSP has no object for the payout and a new key is
// needed (AttemptKey).
func IdempotencyKey(payoutID string) string { return "aegis-payout-" + payoutID }

// AttemptKey is the payout's key of generation n: n = 0 is
// IdempotencyKey. A new generation is taken only after the PSP confirmed
// that no object exists for the payout, so no key is ever used for two
// different objects.
func AttemptKey(payoutID string, n int) string {
	if n <= 0 {
		return IdempotencyKey(payoutID)
	}
	return IdempotencyKey(payoutID) + "-k" + strconv.Itoa(n)
}

// Lookup asks the PSP for the object of a payout (Stripe: the payout or
// transfer whose metadata[payout_id] is the payout id; Paystack: the
// transfer whose reference is the payout id).
type Lookup struct {
	PayoutID        string
	Destination     string
	ExternalAccount string
	// Transfer is the payout's Stripe transfer when it is known.
	Transfer string
	// Since bounds the search: the object cannot be older than the payout.
	Since time.Time
}

// ErrNotFound means the PSP answered that it has no object for the payout:
// the only answer after which a payout whose outcome was unknown may be
// sent again under a new key, or failed for good.
var ErrNotFound = errors.New("the PSP has no object for the payout")

// Result is the PSP's acceptance of a payout.
type Result struct {
	// Reference is the PSP's id for it (po_…, tr_…, TRF_…).
	Reference string
	// Status is the PSP object's status as returned.
	Status string
	// Final is true when the money has moved already (a Stripe transfer, a
	// Paystack transfer answered "success"); otherwise a webhook finishes it.
	Final bool
	// Failed is true when a looked-up object has failed at the PSP (a
	// Stripe payout failed or canceled, a Paystack transfer failed or
	// reversed): the PSP itself says the money did not leave.
	Failed bool
	// Attention is set when the object is neither paid, failed nor simply
	// in progress: a person must act (AttentionOTP), or the PSP answered a
	// status it does not document (AttentionUnmapped). Such an object is
	// never settled on: not paid, not failed. "" otherwise.
	Attention Attention
	// Amount and Currency are the object's, when the PSP says (lookups).
	Amount   int64
	Currency string
	// Transfer is the Stripe transfer of a payout to a connected account's
	// external account (the first of its two objects), "" otherwise.
	Transfer string
	// PayoutMissing: the transfer is made and the connected account's
	// payout is not (yet): the money is at the connected account, and the
	// payout's next request is that payout, never another transfer.
	PayoutMissing bool
	// PayoutID is our payout id as the looked-up object carries it: Stripe
	// metadata[payout_id] on the Payout or Transfer, the Paystack
	// transfer's reference (we create it with the payout id as reference).
	// An operator's resolution is applied only on an object that carries
	// its payout's id.
	PayoutID string
}

// Attention says why a PSP object waits for something other than the PSP.
// Its value is the error class of the payout's dead letter.
type Attention string

// What a PSP object may need besides time.
const (
	// AttentionOTP: a Paystack transfer in status otp waits for a one-time
	// password that Paystack sent to the business's phone or email; only a
	// person can enter it (Dashboard, or POST /transfer/finalize_transfer).
	// Paystack abandons it when none is given within 30 minutes.
	AttentionOTP Attention = "psp_otp_required"
	// AttentionUnmapped: a status the PSP's documentation does not list.
	AttentionUnmapped Attention = "psp_status_unmapped"
	// AttentionConnectedPayout: the transfer reached the connected account
	// but its payout to the bank account or card failed or was canceled.
	// The money is in the connected account's Stripe balance, not back in
	// ours: nothing may go back to the wallet until a person reverses the
	// transfer (its transfer.reversed returns the money) or pays it out
	// again.
	AttentionConnectedPayout Attention = "connected_payout_failed"
)

// Client sends payouts to one provider.
type Client interface {
	Provider() string
	CreatePayout(ctx context.Context, req Request) (Result, error)
	// FindPayout looks the payout's object up: its Result, ErrNotFound when
	// the PSP confirms there is none, or another error when it could not
	// tell (which leaves the outcome unknown).
	FindPayout(ctx context.Context, l Lookup) (Result, error)
}

// Error is a PSP's refusal or a failure to reach it.
type Error struct {
	Provider string
	Status   int
	Code     string
	Message  string
	// Unknown is true when the PSP may have executed the request.
	Unknown bool
	cause   error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	if e.Status != 0 {
		b.WriteString(" " + strconv.Itoa(e.Status))
	}
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.cause != nil && e.Message == "" {
		b.WriteString(": " + e.cause.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.cause }

// OutcomeUnknown reports whether err leaves open that the PSP executed the
// payout. Errors that are not PSP errors (our own cancellation before the
// call) are not unknown; a breaker refusal means the call was never made.
func OutcomeUnknown(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Unknown
}

// ServerError reports whether the PSP answered err with a 5xx. Stripe saves
// the answer of a request that began executing under its Idempotency-Key,
// 5xx included, and replays it for every retry with that key: after one, a
// retry under the same key cannot succeed, so the next attempt looks the
// object up and, if there is none, takes a new key.
func ServerError(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status >= 500
}

// KeyGeneration is the generation n of a key made by AttemptKey(id, n).
func KeyGeneration(payoutID, key string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(key, IdempotencyKey(payoutID)+"-k"))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// classifyHTTP turns a PSP's HTTP answer into a classified error.
func classifyHTTP(e *Error, retryAfter time.Duration) error {
	switch {
	case e.Status == 429:
		if retryAfter <= 0 {
			retryAfter = time.Second
		}
		return errclass.RetryAfter(e, retryAfter)
	case e.Status == 409: // Stripe idempotency_key_in_use: the first try still runs
		e.Unknown = true
		return errclass.AsTransient(e)
	case e.Status == 401 || e.Status == 403:
		// Our key is wrong or revoked: an operator must fix configuration;
		// the payout was certainly not made (Stripe: authentication runs
		// before the idempotency layer and executes nothing). Keep retrying
		// (and trip the breaker) rather than failing every payout while the
		// key is fixed.
		return errclass.AsTransient(e)
	case e.Status >= 500:
		// Every 5xx, 503 included: neither Stripe nor Paystack documents
		// any 5xx as "not executed". Stripe saves the answer of a request
		// that began executing under its key, 500s included (so a 5xx may
		// follow execution); Paystack's error reference says only that the
		// request could not be fulfilled because of an error on its end,
		// and asks for a conclusive transfer status before any retry. The
		// payout may have been made (docs/reference/psp-outcomes.md).
		e.Unknown = true
		return errclass.AsTransient(e)
	case e.Status >= 400:
		return errclass.AsPermanent(e)
	}
	e.Unknown = true
	return errclass.AsTransient(e)
}

// classifyTransport turns a failure to get an answer into a classified error.
func classifyTransport(provider string, err error) error {
	if errors.Is(err, context.Canceled) {
		return err // our shutdown: not a PSP failure, not an attempt
	}
	e := &Error{Provider: provider, cause: err, Unknown: true}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		e.Unknown = false // never reached the PSP
	}
	return errclass.AsTransient(e)
}

// unknownOutcome is a transient failure after which the PSP may have
// executed the request.
func unknownOutcome(provider, msg string, cause error) error {
	return errclass.AsTransient(&Error{Provider: provider, Message: msg, Unknown: true, cause: cause})
}

func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := time.Parse(time.RFC1123, v); err == nil {
		return time.Until(t)
	}
	return 0
}

// Guarded wraps a client with its provider's breaker.
type Guarded struct {
	Client
	breaker *breaker.Breaker[Result]
}

// WithBreaker returns c behind br.
func WithBreaker(c Client, br *breaker.Breaker[Result]) *Guarded {
	return &Guarded{Client: c, breaker: br}
}

// CreatePayout calls the PSP unless the breaker is open.
func (g *Guarded) CreatePayout(ctx context.Context, req Request) (Result, error) {
	return g.breaker.Execute(func() (Result, error) { return g.Client.CreatePayout(ctx, req) })
}

// FindPayout looks the payout up unless the breaker is open. A confirmed
// absence is an answer, not a failure: it does not count against the PSP.
func (g *Guarded) FindPayout(ctx context.Context, l Lookup) (Result, error) {
	var notFound bool
	res, err := g.breaker.Execute(func() (Result, error) {
		res, err := g.Client.FindPayout(ctx, l)
		if errors.Is(err, ErrNotFound) {
			notFound = true
			return Result{}, nil
		}
		return res, err
	})
	if err == nil && notFound {
		return Result{}, ErrNotFound
	}
	return res, err
}

// BreakerState is the breaker's state: closed, half-open or open.
func (g *Guarded) BreakerState() string { return string(g.breaker.State()) }

// ErrNoProvider means a payout names a provider that is not configured.
var ErrNoProvider = errors.New("payout provider not configured")

// Registry finds the client for a provider.
type Registry map[string]*Guarded

// Get returns the client for provider.
func (r Registry) Get(provider string) (*Guarded, error) {
	c, ok := r[provider]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoProvider, provider)
	}
	return c, nil
}
