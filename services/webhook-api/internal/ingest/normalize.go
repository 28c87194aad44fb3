package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76"

	"github.com/aegis-payments/aegis/pkg/event"
)

// Providers.
const (
	Stripe   = "stripe"
	Paystack = "paystack"
)

// ErrMalformed means the body is not an event we can even identify (not
// JSON, no id or type). The PSP gets a 400.
var ErrMalformed = errors.New("malformed webhook body")

// Normalized is a parsed webhook. Problem is set when the event is one we act
// on but lacks what acting needs; such events are stored and dead-lettered.
type Normalized struct {
	Event   event.PSPEvent
	Problem string
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// NormalizeStripe parses a Stripe event of any api_version.
func NormalizeStripe(body []byte, now time.Time) (Normalized, error) {
	var ev stripe.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return Normalized{}, malformed("not a JSON Stripe event: %v", err)
	}
	if ev.ID == "" || ev.Type == "" {
		return Normalized{}, malformed("Stripe event without id or type")
	}
	if ev.Data == nil || len(ev.Data.Raw) == 0 || ev.Data.Raw[0] != '{' {
		return Normalized{}, malformed("Stripe event %s without data.object", ev.ID)
	}
	e := event.PSPEvent{
		Provider: Stripe, EventID: ev.ID, Type: string(ev.Type), Action: event.ActionNone,
		OccurredAt: now.UTC(), Raw: json.RawMessage(body),
	}
	if ev.Created > 0 {
		e.OccurredAt = time.Unix(ev.Created, 0).UTC()
	}
	var problem string
	switch ev.Type {
	case "payment_intent.succeeded":
		var pi stripe.PaymentIntent
		if err := json.Unmarshal(ev.Data.Raw, &pi); err != nil {
			return Normalized{}, malformed("payment_intent object: %v", err)
		}
		amount := pi.AmountReceived
		if amount == 0 {
			amount = pi.Amount
		}
		e.Action, e.Reference, e.ObjectStatus = event.ActionCredit, pi.ID, string(pi.Status)
		e.UserID, e.Amount, e.Currency = pi.Metadata["user_id"], amount, strings.ToLower(string(pi.Currency))
		problem = creditProblem(e, "metadata.user_id")
	case "charge.succeeded":
		var ch stripe.Charge
		if err := json.Unmarshal(ev.Data.Raw, &ch); err != nil {
			return Normalized{}, malformed("charge object: %v", err)
		}
		e.Reference, e.ObjectStatus = ch.ID, string(ch.Status)
		if ch.PaymentIntent != nil && ch.PaymentIntent.ID != "" {
			e.Reference = ch.PaymentIntent.ID
		}
		e.UserID, e.Currency = ch.Metadata["user_id"], strings.ToLower(string(ch.Currency))
		if !ch.Captured {
			// Authorised only: money moves on capture (payment_intent.succeeded).
			break
		}
		e.Action, e.Amount = event.ActionCredit, ch.AmountCaptured
		if e.Amount == 0 {
			e.Amount = ch.Amount
		}
		problem = creditProblem(e, "metadata.user_id")
	case "payout.paid", "payout.failed":
		var po stripe.Payout
		if err := json.Unmarshal(ev.Data.Raw, &po); err != nil {
			return Normalized{}, malformed("payout object: %v", err)
		}
		e.Action = event.ActionPayoutPaid
		if ev.Type == "payout.failed" {
			e.Action = event.ActionPayoutFailed
		}
		e.Reference, e.PayoutID, e.ObjectStatus = po.ID, po.Metadata["payout_id"], string(po.Status)
		e.Amount, e.Currency, e.FailureCode = po.Amount, strings.ToLower(string(po.Currency)), string(po.FailureCode)
		if e.PayoutID == "" {
			problem = fmt.Sprintf("stripe %s %s has no metadata.payout_id: cannot match it to a payout", ev.Type, po.ID)
		}
	}
	return Normalized{Event: e, Problem: problem}, nil
}

func creditProblem(e event.PSPEvent, userField string) string {
	var missing []string
	if e.UserID == "" {
		missing = append(missing, userField)
	}
	if e.Amount <= 0 {
		missing = append(missing, "a positive amount")
	}
	if len(e.Currency) != 3 {
		missing = append(missing, "a currency")
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("%s %s %s has no %s: cannot credit a wallet", e.Provider, e.Type, e.Reference, strings.Join(missing, ", "))
}

type paystackEvent struct {
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

type paystackData struct {
	ID           json.RawMessage `json:"id"`
	Reference    string          `json:"reference"`
	Amount       int64           `json:"amount"`
	Currency     string          `json:"currency"`
	Status       string          `json:"status"`
	Metadata     json.RawMessage `json:"metadata"`
	TransferCode string          `json:"transfer_code"`
	PaidAt       string          `json:"paid_at"`
	CreatedAt    string          `json:"createdAt"`
	UpdatedAt    string          `json:"updatedAt"`
	Reason       string          `json:"reason"`
}

// NormalizePaystack parses a Paystack event. Paystack events carry no event
// id, so the identity is the event name with the object's id (or reference):
// a resent webhook maps to the same identity and is deduplicated.
func NormalizePaystack(body []byte, now time.Time) (Normalized, error) {
	var ev paystackEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return Normalized{}, malformed("not a JSON Paystack event: %v", err)
	}
	if ev.Event == "" {
		return Normalized{}, malformed("Paystack event without event name")
	}
	if len(ev.Data) == 0 || ev.Data[0] != '{' {
		return Normalized{}, malformed("Paystack event without data object")
	}
	var d paystackData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return Normalized{}, malformed("Paystack data: %v", err)
	}
	objectID := scalar(d.ID)
	identity := objectID
	if identity == "" {
		identity = d.Reference
	}
	if identity == "" {
		sum := sha256.Sum256(body)
		identity = "sha256-" + hex.EncodeToString(sum[:16])
	}
	e := event.PSPEvent{
		Provider: Paystack, EventID: ev.Event + ":" + identity, Type: ev.Event, Action: event.ActionNone,
		Reference: d.Reference, Amount: d.Amount, Currency: strings.ToLower(d.Currency), ObjectStatus: d.Status,
		OccurredAt: firstTime(now, d.PaidAt, d.UpdatedAt, d.CreatedAt), Raw: json.RawMessage(body),
	}
	var problem string
	switch ev.Event {
	case "charge.success":
		e.Action = event.ActionCredit
		e.UserID = metadataUserID(d.Metadata)
		if e.Reference == "" {
			e.Reference = objectID
		}
		problem = creditProblem(e, "data.metadata.user_id")
	case "transfer.success", "transfer.failed", "transfer.reversed":
		e.Action = map[string]event.Action{
			"transfer.success":  event.ActionPayoutPaid,
			"transfer.failed":   event.ActionPayoutFailed,
			"transfer.reversed": event.ActionPayoutReversed,
		}[ev.Event]
		// Our transfers use the payout id as their reference (CONTRACT.md).
		e.PayoutID = d.Reference
		if d.TransferCode != "" {
			e.Reference = d.TransferCode
		}
		if e.PayoutID == "" {
			problem = fmt.Sprintf("paystack %s has no data.reference: cannot match it to a payout", ev.Event)
		}
	}
	return Normalized{Event: e, Problem: problem}, nil
}

// scalar renders a JSON number or string as text ("" for null or objects).
func scalar(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// metadataUserID reads user_id from Paystack metadata, which arrives as an
// object, as a JSON-encoded string, or as "" or 0 when empty.
func metadataUserID(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		raw = []byte(s)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	return scalar(m["user_id"])
}

func firstTime(fallback time.Time, values ...string) time.Time {
	for _, v := range values {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t.UTC()
		}
	}
	return fallback.UTC()
}
