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
)

// Errors the API maps to statuses.
var (
	ErrNotFound  = errors.New("payout not found")
	ErrKeyReused = errors.New("idempotency key reused with a different request")
)

// ValidationError names the field a request got wrong.
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Message }

// Request is the body of POST /v1/payouts.
type Request struct {
	UserID      string `json:"user_id"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Destination string `json:"destination"`
	Provider    string `json:"provider"`
}

var currencyRE = regexp.MustCompile(`^[a-z]{3}$`)

// Normalize validates r and puts it in canonical form (currency lowercase,
// fields trimmed). enabled reports whether a provider can take payouts.
func (r *Request) Normalize(enabled func(provider string) bool) error {
	r.UserID = strings.TrimSpace(r.UserID)
	r.Currency = strings.ToLower(strings.TrimSpace(r.Currency))
	r.Destination = strings.TrimSpace(r.Destination)
	r.Provider = strings.ToLower(strings.TrimSpace(r.Provider))
	switch {
	case r.UserID == "" || len(r.UserID) > 128:
		return &ValidationError{"user_id", "required, at most 128 characters"}
	case r.Amount <= 0:
		return &ValidationError{"amount", "must be a positive integer in minor units"}
	case !currencyRE.MatchString(r.Currency):
		return &ValidationError{"currency", "must be a three-letter ISO 4217 code"}
	case r.Destination == "" || len(r.Destination) > 255:
		return &ValidationError{"destination", "required, at most 255 characters"}
	case r.Provider != "stripe" && r.Provider != "paystack":
		return &ValidationError{"provider", `must be "stripe" or "paystack"`}
	case !enabled(r.Provider):
		return &ValidationError{"provider", fmt.Sprintf("%s payouts are not enabled on this deployment", r.Provider)}
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
	ID           string       `json:"payout_id"`
	Status       string       `json:"status"`
	UserID       string       `json:"user_id"`
	Amount       int64        `json:"amount"`
	Currency     string       `json:"currency"`
	Destination  string       `json:"destination"`
	Provider     string       `json:"provider"`
	Attempts     int          `json:"attempts"`
	PSPReference string       `json:"psp_reference,omitempty"`
	LastError    string       `json:"last_error,omitempty"`
	ErrorClass   string       `json:"error_class,omitempty"`
	CreatedAt    time.Time    `json:"created_at"`
	UpdatedAt    time.Time    `json:"updated_at"`
	History      []Transition `json:"history"`
}
