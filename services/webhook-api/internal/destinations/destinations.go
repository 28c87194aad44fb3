package destinations

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/provider"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/validation"
)

// Errors the API maps to statuses.
var (
	// ErrNotFound: no such destination for this user (404).
	ErrNotFound = errors.New("destination not found")
	// ErrNotRegistered: a payout names a destination that is not an active
	// registration of its user and provider (422).
	ErrNotRegistered = errors.New("destination is not registered for this user")
)

// Statuses.
const (
	StatusActive   = "active"
	StatusDisabled = "disabled"
)

// Destination is one registration.
type Destination struct {
	ID          string     `json:"destination_id"`
	UserID      string     `json:"user_id"`
	Provider    string     `json:"provider"`
	Destination string     `json:"destination"`
	Type        string     `json:"type"`
	Status      string     `json:"status"`
	CreatedBy   string     `json:"created_by"`
	CreatedAt   time.Time  `json:"created_at"`
	DisabledBy  *string    `json:"disabled_by"`
	DisabledAt  *time.Time `json:"disabled_at"`
	// DisabledReason says why it was disabled other than by its client.
	DisabledReason *string `json:"disabled_reason"`
	// ExternalAccount is the Stripe connected account's bank account or
	// card its payouts go to; nil for a connected account paid by transfer
	// alone and for other providers.
	ExternalAccount *string `json:"external_account"`
	// Currency is the one it receives; nil when any.
	Currency *string `json:"currency"`
	// PSPCheckedAt is when its PSP confirmed it (nil: never checked).
	PSPCheckedAt *time.Time `json:"psp_checked_at"`
	// PSPCheck is what its PSP said (capabilities, country, currencies).
	PSPCheck json.RawMessage `json:"psp_check"`
}

// Registration is the body of POST /v1/users/{user_id}/destinations.
type Registration struct {
	Provider    string `json:"provider"`
	Destination string `json:"destination"`
	// ExternalAccount (Stripe only) names one of the connected account's
	// bank accounts (ba_…) or cards (card_…) for its payouts.
	ExternalAccount string `json:"external_account,omitempty"`
}

// shapes are the identifiers each provider pays to, by prefix: the type it
// names and the pattern of the whole value. Stripe ids are letters and
// digits after the prefix; underscores are allowed for test fixtures.
// Stripe pays another person only through Connect, so its one shape is a
// connected account; a bare external account (ba_…, card_…) would be one of
// the platform's own (NotConnectedAccount). Rows of the types bank_account
// and card remain from before, disabled by migration 000039.
var shapes = map[string][]struct {
	prefix, kind string
	re           *regexp.Regexp
}{
	string(provider.Stripe): {
		{"acct_", "connected_account", regexp.MustCompile(`^acct_[A-Za-z0-9_]+$`)},
	},
	string(provider.Paystack): {
		{"RCP_", "transfer_recipient", regexp.MustCompile(`^RCP_[A-Za-z0-9_]+$`)},
	},
}

// MaxDestination bounds a destination value.
const MaxDestination = 255

// Normalize validates r for userID and returns the destination type it
// names.
func (r *Registration) Normalize(userID string) (kind string, err error) {
	r.Provider = strings.ToLower(strings.TrimSpace(r.Provider))
	r.Destination = strings.TrimSpace(r.Destination)
	r.ExternalAccount = strings.TrimSpace(r.ExternalAccount)
	if err := ValidateUserID(userID); err != nil {
		return "", err
	}
	kind, err = Shape(r.Provider, r.Destination)
	if err != nil || r.ExternalAccount == "" {
		return kind, err
	}
	if kind != "connected_account" {
		return "", &validation.Error{Field: "external_account",
			Message: "is only for a Stripe connected account (acct_…): the bank account or card of its own that its payouts go to"}
	}
	if !externalAccount.MatchString(r.ExternalAccount) {
		return "", &validation.Error{Field: "external_account", Message: "must be a Stripe bank account (ba_…) or card (card_…) id"}
	}
	return kind, nil
}

var externalAccount = regexp.MustCompile(`^(ba|card)_[A-Za-z0-9_]{1,250}$`)

// Shape checks that destination is an identifier provider pays to and
// returns its type.
func Shape(prov, destination string) (kind string, err error) {
	kinds, ok := shapes[prov]
	if !ok {
		return "", &validation.Error{Field: "provider", Message: `must be "stripe" or "paystack"`}
	}
	if err := validation.Text("destination", destination, MaxDestination); err != nil {
		return "", err
	}
	if prov == string(provider.Stripe) && !strings.HasPrefix(destination, "acct_") {
		return "", NotConnectedAccount(destination)
	}
	for _, k := range kinds {
		if k.re.MatchString(destination) {
			return k.kind, nil
		}
	}
	want := map[string]string{
		string(provider.Stripe):   "a Stripe connected account id (acct_ then letters, digits or _)",
		string(provider.Paystack): "a Paystack transfer recipient code (RCP_…)",
	}[prov]
	return "", &validation.Error{Field: "destination", Message: "must be " + want}
}

// ConnectMessage says why a Stripe destination must be a connected account
// and what to register instead. Migration 000039 keeps the same words as the
// disabled_reason of the bare destinations it disabled.
const ConnectMessage = "Stripe pays out to other people only through Connect: register the user's " +
	"connected account (acct_…) as destination and, to pay out to one of its bank accounts or cards, " +
	"that one as external_account"

// NotConnectedAccount refuses a Stripe destination that is not a connected
// account: a bare ba_…/card_… names an external account of the platform's
// own, and a payout to it would go to the platform's bank, not the user.
func NotConnectedAccount(destination string) *RefusedError {
	return &RefusedError{Code: CodeNotConnectedAccount,
		Message: fmt.Sprintf("Stripe destination %q is not a connected account: %s", destination, ConnectMessage)}
}

// ValidateUserID checks a user id from a path or a body.
func ValidateUserID(userID string) error {
	return validation.Text("user_id", userID, event.MaxUserID)
}
