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

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/verify"
)

// Providers.
const (
	Stripe   = "stripe"
	Paystack = "paystack"
)

// ErrMalformed means the body is not an event we can even identify (not
// JSON, no id or type). The PSP gets a 400.
var ErrMalformed = errors.New("malformed webhook body")

// ErrFromTheFuture means a Stripe event's created time is later than now
// plus the signature tolerance. It is refused like a stale signature: stored,
// such an event would make every real event about its object look stale.
var ErrFromTheFuture = errors.New("event created in the future beyond the tolerance")

// Normalized is a parsed webhook. Problem is set when the event is one we act
// on but lacks what acting needs; such events are stored and dead-lettered.
type Normalized struct {
	Event   event.PSPEvent
	Problem string
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// stripeEvent is the part of a Stripe event we act on. It is decoded in one
// pass into these few fields rather than through stripe-go's types, which
// decode the whole object twice (a typed struct and a map of everything) and
// cost a tenth of the service's CPU on its hottest path. Signature
// verification stays stripe-go's.
type stripeEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	// Account is set on events from a connected account (Connect).
	Account  string `json:"account"`
	Livemode *bool  `json:"livemode"`
	Data     struct {
		Object *stripeObject `json:"object"`
	} `json:"data"`
}

// stripeObject holds the fields of PaymentIntent, Charge and Payout objects
// that Aegis reads (field names as in Stripe's API reference).
type stripeObject struct {
	ID             string            `json:"id"`
	Amount         int64             `json:"amount"`
	AmountReceived int64             `json:"amount_received"`
	AmountCaptured int64             `json:"amount_captured"`
	Captured       bool              `json:"captured"`
	Currency       string            `json:"currency"`
	Status         string            `json:"status"`
	FailureCode    *string           `json:"failure_code"`
	Metadata       map[string]string `json:"metadata"`
	// PaymentIntent is an id, or the expanded object, or null.
	PaymentIntent json.RawMessage `json:"payment_intent"`
}

// paymentIntentID reads a charge's payment_intent, expanded or not.
func (o *stripeObject) paymentIntentID() string {
	raw := bytes.TrimSpace(o.PaymentIntent)
	if len(raw) > 0 && raw[0] == '{' {
		var pi struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &pi) == nil {
			return pi.ID
		}
		return ""
	}
	return scalar(raw)
}

// NormalizeStripe parses a Stripe event of any api_version.
func NormalizeStripe(body []byte, now time.Time) (Normalized, error) {
	var ev stripeEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return Normalized{}, malformed("not a JSON Stripe event: %v", err)
	}
	if ev.ID == "" || ev.Type == "" {
		return Normalized{}, malformed("Stripe event without id or type")
	}
	obj := ev.Data.Object
	if obj == nil {
		return Normalized{}, malformed("Stripe event %s without data.object", ev.ID)
	}
	e := event.PSPEvent{
		Provider: Stripe, EventID: ev.ID, Type: ev.Type, Action: event.ActionNone,
		OccurredAt: now.UTC(), Raw: json.RawMessage(body), ObjectStatus: obj.Status,
		Account: ev.Account, Livemode: ev.Livemode,
	}
	if ev.Created > 0 {
		if ev.Created > now.Add(verify.StripeTolerance).Unix() {
			return Normalized{}, fmt.Errorf("%w: created at %d", ErrFromTheFuture, ev.Created)
		}
		e.OccurredAt = time.Unix(ev.Created, 0).UTC()
	}
	var problem string
	switch ev.Type {
	case "payment_intent.succeeded":
		amount := obj.AmountReceived
		if amount == 0 {
			amount = obj.Amount
		}
		e.Action, e.Reference = event.ActionCredit, obj.ID
		e.UserID, e.Amount, e.Currency = obj.Metadata["user_id"], amount, strings.ToLower(obj.Currency)
		problem = creditProblem(e, "metadata.user_id")
	case "charge.succeeded":
		e.Reference = obj.ID
		if pi := obj.paymentIntentID(); pi != "" {
			e.Reference = pi
		}
		e.UserID, e.Currency = obj.Metadata["user_id"], strings.ToLower(obj.Currency)
		if !obj.Captured {
			// Authorised only: money moves on capture (payment_intent.succeeded).
			break
		}
		e.Action, e.Amount = event.ActionCredit, obj.AmountCaptured
		if e.Amount == 0 {
			e.Amount = obj.Amount
		}
		problem = creditProblem(e, "metadata.user_id")
	case "payout.paid", "payout.failed":
		e.Action = event.ActionPayoutPaid
		if ev.Type == "payout.failed" {
			e.Action = event.ActionPayoutFailed
		}
		e.Reference, e.PayoutID = obj.ID, obj.Metadata["payout_id"]
		e.Amount, e.Currency = obj.Amount, strings.ToLower(obj.Currency)
		if obj.FailureCode != nil {
			e.FailureCode = *obj.FailureCode
		}
		if e.PayoutID == "" {
			problem = fmt.Sprintf("stripe %s %s has no metadata.payout_id: cannot match it to a payout", ev.Type, obj.ID)
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
