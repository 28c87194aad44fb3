package destinations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/stripe/stripe-go/v76"

	"github.com/aegis-payments/aegis/pkg/paystackapi"
	"github.com/aegis-payments/aegis/pkg/provider"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
)

// Checker asks a destination's PSP whether it exists and can be paid
// before it is registered. A PSP without a client (its secret key unset)
// cannot be checked, and its destinations cannot be registered.
type Checker struct {
	Stripe   *stripeapi.Client
	Paystack *paystackapi.Client
}

// Found is what the PSP said about a destination.
type Found struct {
	// Currency is the one it receives (lower case); "" when any.
	Currency string
	// Record is what was checked, kept with the registration.
	Record json.RawMessage
}

// RefusedError is the PSP's answer that a destination cannot be paid: it
// does not exist there, or it cannot receive money; or a Stripe destination
// that is not a connected account. Nothing is registered.
type RefusedError struct {
	// Code is destination_unknown, destination_not_payable or
	// destination_not_connected_account.
	Code    string
	Message string
}

func (e *RefusedError) Error() string { return e.Message }

// Refusal codes.
const (
	CodeUnknown    = "destination_unknown"
	CodeNotPayable = "destination_not_payable"
	// CodeNotConnectedAccount: a Stripe destination other than acct_….
	CodeNotConnectedAccount = "destination_not_connected_account"
)

// ErrPSPUnavailable means the PSP could not be asked (not configured,
// unreachable, or it failed to answer): nothing is registered, and the
// client may retry.
var ErrPSPUnavailable = errors.New("the destination could not be checked at its PSP")

// Check asks reg's PSP about it; reg must be normalized.
func (c Checker) Check(ctx context.Context, reg Registration) (Found, error) {
	switch reg.Provider {
	case string(provider.Stripe):
		if !strings.HasPrefix(reg.Destination, "acct_") {
			// Normalize refuses it already; never register one unchecked.
			return Found{}, NotConnectedAccount(reg.Destination)
		}
		if c.Stripe == nil {
			return Found{}, fmt.Errorf("%w: STRIPE_SECRET_KEY is not set", ErrPSPUnavailable)
		}
		return c.stripe(ctx, reg)
	case string(provider.Paystack):
		if c.Paystack == nil {
			return Found{}, fmt.Errorf("%w: PAYSTACK_SECRET_KEY is not set", ErrPSPUnavailable)
		}
		return c.paystack(ctx, reg.Destination)
	}
	return Found{}, fmt.Errorf("check destination: unknown provider %q", reg.Provider)
}

// stripeRecord is what a Stripe check keeps.
type stripeRecord struct {
	Account struct {
		Country         string `json:"country"`
		DefaultCurrency string `json:"default_currency"`
		PayoutsEnabled  bool   `json:"payouts_enabled"`
		Transfers       string `json:"transfers"`
	} `json:"account"`
	ExternalAccount *externalRecord `json:"external_account,omitempty"`
}

type externalRecord struct {
	Object   string `json:"object"`
	Currency string `json:"currency"`
	Country  string `json:"country"`
	Status   string `json:"status,omitempty"`
}

// stripe checks a connected account: it exists for this platform and can
// receive transfers; with an external account, the account can pay out and
// the external account is its own and not failed.
func (c Checker) stripe(ctx context.Context, reg Registration) (Found, error) {
	acct, err := c.Stripe.Account(ctx, reg.Destination)
	if stripeapi.IsNotFound(err) {
		return Found{}, &RefusedError{Code: CodeUnknown,
			Message: fmt.Sprintf("Stripe has no connected account %s for this platform", reg.Destination)}
	}
	if err != nil {
		return Found{}, stripeUnavailable(err)
	}
	var rec stripeRecord
	rec.Account.Country, rec.Account.DefaultCurrency = acct.Country, string(acct.DefaultCurrency)
	rec.Account.PayoutsEnabled = acct.PayoutsEnabled
	if acct.Capabilities != nil {
		rec.Account.Transfers = string(acct.Capabilities.Transfers)
	}
	if rec.Account.Transfers != string(stripe.AccountCapabilityStatusActive) {
		return Found{}, &RefusedError{Code: CodeNotPayable, Message: fmt.Sprintf(
			"connected account %s cannot receive transfers (its transfers capability is %q, not active)",
			reg.Destination, rec.Account.Transfers)}
	}
	found := Found{}
	if reg.ExternalAccount != "" {
		if !acct.PayoutsEnabled {
			return Found{}, &RefusedError{Code: CodeNotPayable, Message: fmt.Sprintf(
				"connected account %s cannot pay out to its external accounts (payouts_enabled is false)", reg.Destination)}
		}
		ea, err := c.Stripe.ExternalAccount(ctx, reg.Destination, reg.ExternalAccount)
		if stripeapi.IsNotFound(err) || (err == nil && ea.Account != "" && ea.Account != reg.Destination) {
			return Found{}, &RefusedError{Code: CodeUnknown, Message: fmt.Sprintf(
				"connected account %s has no external account %s", reg.Destination, reg.ExternalAccount)}
		}
		if err != nil {
			return Found{}, stripeUnavailable(err)
		}
		if ea.Status == "verification_failed" || ea.Status == "errored" {
			return Found{}, &RefusedError{Code: CodeNotPayable, Message: fmt.Sprintf(
				"external account %s cannot be paid (its status is %s)", reg.ExternalAccount, ea.Status)}
		}
		rec.ExternalAccount = &externalRecord{ea.Object, ea.Currency, ea.Country, ea.Status}
		found.Currency = strings.ToLower(ea.Currency)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return Found{}, fmt.Errorf("encode stripe check: %w", err)
	}
	found.Record = b
	return found, nil
}

// stripeUnavailable is any answer but a 404: a 5xx, a failure to reach
// Stripe, and a refusal of our own key (401/403, a configuration fault)
// all leave the destination unchecked.
func stripeUnavailable(err error) error {
	var se *stripe.Error
	if errors.As(err, &se) {
		return fmt.Errorf("%w: Stripe answered %d %s", ErrPSPUnavailable, se.HTTPStatusCode, se.Msg)
	}
	return fmt.Errorf("%w: %w", ErrPSPUnavailable, err)
}

// paystackRecipient is the part of a transfer recipient a check reads.
type paystackRecipient struct {
	Active    *bool  `json:"active"`
	IsDeleted bool   `json:"is_deleted"`
	Type      string `json:"type"`
	Currency  string `json:"currency"`
	Code      string `json:"recipient_code"`
}

// paystack checks a transfer recipient: it exists, is active and not
// deleted; its currency is the one it receives.
func (c Checker) paystack(ctx context.Context, code string) (Found, error) {
	ans, err := c.Paystack.Recipient(ctx, code)
	if err != nil {
		return Found{}, fmt.Errorf("%w: %w", ErrPSPUnavailable, err)
	}
	if ans.StatusCode == 404 {
		return Found{}, &RefusedError{Code: CodeUnknown, Message: fmt.Sprintf("Paystack has no transfer recipient %s", code)}
	}
	if !ans.OK() {
		return Found{}, fmt.Errorf("%w: Paystack answered %d %s", ErrPSPUnavailable, ans.StatusCode, ans.Message)
	}
	var r paystackRecipient
	if err := json.Unmarshal(ans.Data, &r); err != nil {
		return Found{}, fmt.Errorf("%w: unreadable recipient: %w", ErrPSPUnavailable, err)
	}
	if r.Code != "" && r.Code != code {
		return Found{}, &RefusedError{Code: CodeUnknown, Message: fmt.Sprintf("Paystack has no transfer recipient %s", code)}
	}
	if r.IsDeleted || (r.Active != nil && !*r.Active) {
		return Found{}, &RefusedError{Code: CodeNotPayable, Message: fmt.Sprintf("transfer recipient %s is inactive at Paystack", code)}
	}
	if len(r.Currency) != 3 {
		return Found{}, fmt.Errorf("%w: recipient %s has no currency", ErrPSPUnavailable, code)
	}
	rec, err := json.Marshal(map[string]any{"type": r.Type, "currency": strings.ToLower(r.Currency), "active": true})
	if err != nil {
		return Found{}, fmt.Errorf("encode paystack check: %w", err)
	}
	return Found{Currency: strings.ToLower(r.Currency), Record: rec}, nil
}
