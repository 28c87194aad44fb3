package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/provider"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/verify"
)

// Providers (pkg/provider), as the untyped strings events carry.
const (
	Stripe   = string(provider.Stripe)
	Paystack = string(provider.Paystack)
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
	AmountReversed int64             `json:"amount_reversed"`
	Captured       bool              `json:"captured"`
	Currency       string            `json:"currency"`
	Status         string            `json:"status"`
	FailureCode    *string           `json:"failure_code"`
	Metadata       map[string]string `json:"metadata"`
	// PaymentIntent is an id, or the expanded object, or null.
	PaymentIntent json.RawMessage `json:"payment_intent"`
	// Charge (on refunds and disputes) is an id or the expanded object.
	Charge json.RawMessage `json:"charge"`
	// Refunds (on a charge) lists its refunds in API versions that expand it.
	Refunds *struct {
		Data []stripeObject `json:"data"`
	} `json:"refunds"`
}

// expandableID reads an id field that may be expanded into an object.
func expandableID(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		var o struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &o) == nil {
			return o.ID
		}
		return ""
	}
	return scalar(raw)
}

// paymentOf is the reference a refund's or dispute's payment was credited
// under: its PaymentIntent, or the charge when it has none (as charge.succeeded).
func (o *stripeObject) paymentOf() string {
	if pi := expandableID(o.PaymentIntent); pi != "" {
		return pi
	}
	return expandableID(o.Charge)
}

// stripeRefundOutcome maps a Stripe refund status: a pending refund has
// already left our Stripe balance, a failed or canceled one comes back.
func stripeRefundOutcome(status string) string {
	switch status {
	case "failed", "canceled":
		return event.OutcomeRefundVoid
	case "succeeded", "pending", "requires_action":
		return event.OutcomeRefunded
	}
	return ""
}

// stripeDisputeOutcome maps a Stripe dispute status. A dispute closed as an
// inquiry (warning_closed) or by refunding the charge releases its hold: the
// money stays, or leaves through the refund, which has its own object.
func stripeDisputeOutcome(status string) string {
	switch status {
	case "won", "warning_closed", "charge_refunded":
		return event.OutcomeDisputeWon
	case "lost":
		return event.OutcomeDisputeLost
	}
	return event.OutcomeDisputeOpen
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
	switch event.Type(ev.Type) {
	case event.StripePaymentIntentSucceeded:
		amount := obj.AmountReceived
		if amount == 0 {
			amount = obj.Amount
		}
		e.Action, e.Reference = event.ActionCredit, obj.ID
		e.UserID, e.Amount, e.Currency = obj.Metadata["user_id"], amount, strings.ToLower(obj.Currency)
		problem = creditProblem(e, "metadata.user_id")
	case event.StripeChargeSucceeded:
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
	case event.StripeRefundCreated, event.StripeRefundUpdated, event.StripeChargeRefundUpdated:
		e.Action, e.Reference = event.ActionRefund, obj.paymentOf()
		e.Returns = []event.Return{{ID: obj.ID, Amount: obj.Amount, Currency: strings.ToLower(obj.Currency),
			Outcome: stripeRefundOutcome(obj.Status)}}
		problem = returnsProblem(e)
	case event.StripeChargeRefunded:
		// The charge lists its refunds only in API versions that expand
		// them; otherwise each refund arrives as its own refund.created.
		e.Reference = obj.ID
		if pi := obj.paymentIntentID(); pi != "" {
			e.Reference = pi
		}
		if obj.Refunds == nil || len(obj.Refunds.Data) == 0 {
			break
		}
		e.Action = event.ActionRefund
		for _, r := range obj.Refunds.Data {
			e.Returns = append(e.Returns, event.Return{ID: r.ID, Amount: r.Amount,
				Currency: strings.ToLower(r.Currency), Outcome: stripeRefundOutcome(r.Status)})
		}
		problem = returnsProblem(e)
	case event.StripeDisputeCreated, event.StripeDisputeUpdated, event.StripeDisputeClosed:
		e.Action, e.Reference = event.ActionDispute, obj.paymentOf()
		e.Returns = []event.Return{{ID: obj.ID, Amount: obj.Amount, Currency: strings.ToLower(obj.Currency),
			Outcome: stripeDisputeOutcome(obj.Status)}}
		problem = returnsProblem(e)
	case event.StripeTransferReversed:
		// A Connect transfer of one of our payouts came back, whole or in
		// part: Stripe sends transfer.reversed for each reversal, with the
		// transfer's amount_reversed so far; the worker gives each part
		// back once.
		e.Action, e.Reference, e.PayoutID = event.ActionPayoutReversed, obj.ID, obj.Metadata["payout_id"]
		e.Amount, e.Currency, e.Reversed = obj.Amount, strings.ToLower(obj.Currency), obj.AmountReversed
		switch {
		case e.PayoutID == "":
			problem = fmt.Sprintf("stripe %s %s has no metadata.payout_id: cannot match it to a payout", ev.Type, obj.ID)
		case obj.AmountReversed <= 0 || obj.AmountReversed > obj.Amount:
			problem = fmt.Sprintf("stripe %s %s reverses %d of %d: not a reversal of this transfer",
				ev.Type, obj.ID, obj.AmountReversed, obj.Amount)
		}
	case event.StripePayoutPaid, event.StripePayoutFailed, event.StripePayoutCanceled, event.StripePayoutUpdated:
		switch {
		case event.Type(ev.Type) == event.StripePayoutPaid:
			e.Action = event.ActionPayoutPaid
		case event.Type(ev.Type) == event.StripePayoutFailed, event.Type(ev.Type) == event.StripePayoutCanceled:
			// A canceled payout never left Stripe: its money is back in
			// our balance, exactly as for a failed one.
			e.Action = event.ActionPayoutFailed
		// payout.updated carries the object as it is now: a final status
		// is the same evidence as that status's own event (the worker
		// treats a second one as a duplicate); any other changes nothing.
		case obj.Status == "paid":
			e.Action = event.ActionPayoutPaid
		case obj.Status == "failed" || obj.Status == "canceled":
			e.Action = event.ActionPayoutFailed
		}
		e.Reference, e.PayoutID = obj.ID, obj.Metadata["payout_id"]
		e.Amount, e.Currency = obj.Amount, strings.ToLower(obj.Currency)
		if obj.FailureCode != nil {
			e.FailureCode = *obj.FailureCode
		}
		if e.PayoutID == "" && e.Action != event.ActionNone {
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

// returnsProblem says what a refund or dispute event lacks to be matched to
// its payment and posted.
func returnsProblem(e event.PSPEvent) string {
	if e.Reference == "" {
		return fmt.Sprintf("%s %s names no payment: cannot match it to a credit", e.Provider, e.Type)
	}
	for _, r := range e.Returns {
		var missing []string
		if r.ID == "" {
			missing = append(missing, "an id")
		}
		if r.Amount <= 0 {
			missing = append(missing, "a positive amount")
		}
		if len(r.Currency) != 3 {
			missing = append(missing, "a currency")
		}
		if r.Outcome == "" {
			missing = append(missing, "a known status")
		}
		if len(missing) > 0 {
			return fmt.Sprintf("%s %s %s has no %s: cannot post it", e.Provider, e.Type, r.ID, strings.Join(missing, ", "))
		}
	}
	return ""
}

type paystackEvent struct {
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

type paystackData struct {
	ID           json.RawMessage `json:"id"`
	Reference    string          `json:"reference"`
	Amount       json.RawMessage `json:"amount"` // a number, or a string in refund events
	Currency     string          `json:"currency"`
	Status       string          `json:"status"`
	Metadata     json.RawMessage `json:"metadata"`
	TransferCode string          `json:"transfer_code"`
	PaidAt       string          `json:"paid_at"`
	CreatedAt    string          `json:"createdAt"`
	UpdatedAt    string          `json:"updatedAt"`
	Reason       string          `json:"reason"`
	// Fees is what Paystack kept of a transaction (kobo; charge.success).
	// Kept raw: a fee we cannot read never stops the credit (paystackFee).
	Fees json.RawMessage `json:"fees"`
}

// paystackFee reads charge.success data.fees: a whole number of the
// currency's minor units between 0 and the amount; anything else (null,
// absent, unreadable) is 0, a fee the event does not say, so that the
// credit itself never waits on it.
func paystackFee(raw json.RawMessage, amount int64) int64 {
	var fee int64
	if json.Unmarshal(raw, &fee) != nil || fee < 0 || fee > amount {
		return 0
	}
	return fee
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
		Reference: d.Reference, Amount: scalarInt(d.Amount), Currency: strings.ToLower(d.Currency), ObjectStatus: d.Status,
		OccurredAt: firstTime(now, d.PaidAt, d.UpdatedAt, d.CreatedAt), Raw: json.RawMessage(body),
	}
	var problem string
	switch event.Type(ev.Event) {
	case event.PaystackChargeSuccess:
		e.Action = event.ActionCredit
		e.UserID = metadataUserID(d.Metadata)
		if e.Reference == "" {
			e.Reference = objectID
		}
		e.Fee = paystackFee(d.Fees, e.Amount)
		problem = creditProblem(e, "data.metadata.user_id")
	case event.PaystackTransferSuccess, event.PaystackTransferFailed, event.PaystackTransferReversed:
		e.Action = map[event.Type]event.Action{
			event.PaystackTransferSuccess:  event.ActionPayoutPaid,
			event.PaystackTransferFailed:   event.ActionPayoutFailed,
			event.PaystackTransferReversed: event.ActionPayoutReversed,
		}[event.Type(ev.Event)]
		// Our transfers use the payout id as their reference (docs/design/contract.md).
		e.PayoutID = d.Reference
		if d.TransferCode != "" {
			e.Reference = d.TransferCode
		}
		if e.PayoutID == "" {
			problem = fmt.Sprintf("paystack %s has no data.reference: cannot match it to a payout", ev.Event)
		}
	case event.PaystackRefundProcessed, event.PaystackRefundFailed:
		var r paystackRefund
		if err := json.Unmarshal(ev.Data, &r); err != nil {
			return Normalized{}, malformed("Paystack refund data: %v", err)
		}
		outcome := event.OutcomeRefunded
		if event.Type(ev.Event) == event.PaystackRefundFailed {
			outcome = event.OutcomeRefundVoid
		}
		id := scalar(r.RefundReference)
		if id == "" {
			id = objectID
		}
		e.Action, e.Reference, e.Amount = event.ActionRefund, r.TransactionReference, scalarInt(r.Amount)
		e.Returns = []event.Return{{ID: id, Amount: e.Amount, Currency: e.Currency, Outcome: outcome}}
		problem = returnsProblem(e)
	case event.PaystackDisputeCreate, event.PaystackDisputeResolve:
		var dd paystackDispute
		if err := json.Unmarshal(ev.Data, &dd); err != nil {
			return Normalized{}, malformed("Paystack dispute data: %v", err)
		}
		amount := scalarInt(dd.RefundAmount)
		if amount <= 0 {
			amount = dd.Transaction.Amount
		}
		currency := e.Currency
		if currency == "" {
			currency = strings.ToLower(dd.Transaction.Currency)
		}
		outcome := event.OutcomeDisputeOpen
		if event.Type(ev.Event) == event.PaystackDisputeResolve {
			// Paystack: the merchant accepted the chargeback (the money goes
			// back to the customer), or declined it with evidence and won.
			switch dd.Resolution {
			case "merchant-accepted":
				outcome = event.OutcomeDisputeLost
			case "declined":
				outcome = event.OutcomeDisputeWon
			default:
				outcome = ""
			}
		}
		e.Action, e.Reference, e.Amount, e.Currency = event.ActionDispute, dd.Transaction.Reference, amount, currency
		e.Returns = []event.Return{{ID: objectID, Amount: amount, Currency: currency, Outcome: outcome}}
		problem = returnsProblem(e)
	}
	return Normalized{Event: e, Problem: problem}, nil
}

// paystackRefund is the data of a refund.* event (amounts arrive as numbers
// or as strings).
type paystackRefund struct {
	TransactionReference string          `json:"transaction_reference"`
	RefundReference      json.RawMessage `json:"refund_reference"`
	Amount               json.RawMessage `json:"amount"`
}

// paystackDispute is the data of a charge.dispute.* event.
type paystackDispute struct {
	RefundAmount json.RawMessage `json:"refund_amount"`
	Resolution   string          `json:"resolution"`
	Transaction  struct {
		Reference string `json:"reference"`
		Amount    int64  `json:"amount"`
		Currency  string `json:"currency"`
	} `json:"transaction"`
}

// scalarInt reads an integer sent as a JSON number or string (0 if neither).
func scalarInt(raw json.RawMessage) int64 {
	n, err := strconv.ParseInt(scalar(raw), 10, 64)
	if err != nil {
		return 0
	}
	return n
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
