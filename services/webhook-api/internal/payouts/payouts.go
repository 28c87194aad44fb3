package payouts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/aegis-payments/aegis/pkg/provider"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/destinations"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/validation"
)

// Errors the API maps to statuses.
var (
	ErrNotFound  = errors.New("payout not found")
	ErrKeyReused = errors.New("idempotency key reused with a different request")
	// ErrNotCancelable: the worker has taken the payout up (its hold
	// taken, the PSP possibly called); only INITIALIZED can be canceled.
	ErrNotCancelable = errors.New("payout can no longer be canceled")
	// ErrRefused means Postgres refused the request's data (a safety net
	// behind Normalize): the client gets a 400, never a 503 to retry.
	ErrRefused = errors.New("the request's data cannot be stored")
)

// Request is the body of POST /v1/payouts. The destination is named by its
// registered value (destination, as before registration existed) or by its
// id (destination_id), or both, which must then agree.
type Request struct {
	UserID      string `json:"user_id"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Destination string `json:"destination"`
	Provider    string `json:"provider"`
	// DestinationID is omitted from Hash when empty, so the hash of a
	// request without it is what it was before it existed: a client
	// retrying a key across the upgrade gets its payout, not a 422.
	DestinationID string `json:"destination_id,omitempty"`
}

var currencyRE = regexp.MustCompile(`^[a-z]{3}$`)

// Normalize validates r and puts it in canonical form (currency lowercase,
// fields trimmed). enabled reports whether a provider can take payouts.
func (r *Request) Normalize(enabled func(provider string) bool) error {
	r.UserID = strings.TrimSpace(r.UserID)
	r.Currency = strings.ToLower(strings.TrimSpace(r.Currency))
	r.Destination = strings.TrimSpace(r.Destination)
	r.DestinationID = strings.TrimSpace(r.DestinationID)
	r.Provider = strings.ToLower(strings.TrimSpace(r.Provider))
	if err := destinations.ValidateUserID(r.UserID); err != nil {
		return err
	}
	switch {
	case r.Amount <= 0:
		return &validation.Error{Field: "amount", Message: "must be a positive integer in minor units"}
	case !currencyRE.MatchString(r.Currency):
		return &validation.Error{Field: "currency", Message: "must be a three-letter ISO 4217 code"}
	case r.Destination == "" && r.DestinationID == "":
		return &validation.Error{Field: "destination", Message: "required: a registered destination (destination) or its id (destination_id)"}
	case !provider.Valid(r.Provider):
		return &validation.Error{Field: "provider", Message: `must be "stripe" or "paystack"`}
	case !enabled(r.Provider):
		return &validation.Error{Field: "provider", Message: fmt.Sprintf("%s payouts are not enabled on this deployment", r.Provider)}
	}
	if r.Destination != "" {
		if err := validation.Text("destination", r.Destination, destinations.MaxDestination); err != nil {
			return err
		}
	}
	if r.DestinationID != "" {
		if _, err := uuid.Parse(r.DestinationID); err != nil {
			return &validation.Error{Field: "destination_id", Message: "must be a destination id (a UUID)"}
		}
	}
	return nil
}

// Hash identifies the request's content for idempotency checks.
func (r Request) Hash() string {
	b, _ := json.Marshal(r) // a struct of strings and ints always encodes
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Transition is one step of a payout's history.
type Transition struct {
	From       string    `json:"from,omitempty"`
	To         string    `json:"to"`
	Attempt    int       `json:"attempt"`
	Error      string    `json:"error,omitempty"`
	ErrorClass string    `json:"error_class,omitempty"`
	At         time.Time `json:"at"`
}

// Payout is a payout with its history.
type Payout struct {
	ID          string `json:"payout_id"`
	Status      string `json:"status"`
	UserID      string `json:"user_id"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Destination string `json:"destination"`
	// DestinationID is the registered destination the payout was accepted
	// for ("" for payouts from before registration existed).
	DestinationID string `json:"destination_id,omitempty"`
	// ExternalAccount is the Stripe connected account's bank account or
	// card the payout goes to ("" none: a transfer alone, or Paystack).
	ExternalAccount string `json:"external_account,omitempty"`
	Provider        string `json:"provider"`
	Attempts        int    `json:"attempts"`
	// PSPTransfer is the Stripe transfer to the connected account of a
	// payout to its external account, once made; PSPReference is then the
	// connected account's payout.
	PSPTransfer  string       `json:"psp_transfer,omitempty"`
	PSPReference string       `json:"psp_reference,omitempty"`
	LastError    string       `json:"last_error,omitempty"`
	ErrorClass   string       `json:"error_class,omitempty"`
	CreatedAt    time.Time    `json:"created_at"`
	UpdatedAt    time.Time    `json:"updated_at"`
	History      []Transition `json:"history"`
	// PSPRequests is every request made to the PSP for the payout: each
	// create with the Idempotency-Key it carried, each lookup, and what
	// came of it (sending until a create's answer is recorded; accepted,
	// refused, not_executed, unknown, found, not_found).
	PSPRequests []PSPRequest `json:"psp_requests"`
	// Evidence is every PSP outcome event that named the payout and its
	// verdict (applied, outcome_mismatch, stale, recorded).
	Evidence []Evidence `json:"evidence"`
}

// PSPRequest is one request made to the PSP for a payout.
type PSPRequest struct {
	Attempt int    `json:"attempt"`
	Kind    string `json:"kind"`
	// Step is a create's step of a payout paid out on a Stripe connected
	// account: transfer, then connected_payout ("" otherwise).
	Step           string    `json:"step,omitempty"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	Outcome        string    `json:"outcome"`
	PSPReference   string    `json:"psp_reference,omitempty"`
	Error          string    `json:"error,omitempty"`
	At             time.Time `json:"at"`
}

// Evidence is a PSP outcome event about a payout and what became of it.
type Evidence struct {
	Provider     string    `json:"provider"`
	EventID      string    `json:"event_id"`
	Type         string    `json:"type"`
	Amount       int64     `json:"amount"`
	Currency     string    `json:"currency,omitempty"`
	PSPReference string    `json:"psp_reference,omitempty"`
	Verdict      string    `json:"verdict"`
	Reason       string    `json:"reason,omitempty"`
	At           time.Time `json:"at"`
}
