package event

import (
	"time"

	"github.com/aegis-payments/aegis/pkg/payoutstate"
)

// SettlementSchemaVersion is the version of the aegis.settlements schema
// (pkg/event/schema/settlements/v1) the types below produce. A change a
// consumer of the published version could not read (a required field
// removed or retyped, an enum narrowed) is a new version, never an edit;
// schema's compatibility test enforces it.
const SettlementSchemaVersion = "1"

// Event types on aegis.settlements: every money outcome the platform learns.
const (
	// TypePayoutSucceeded: the PSP paid the payout; the hold is settled.
	TypePayoutSucceeded Type = "payout.succeeded"
	// TypePayoutFailed: the payout certainly was not paid; the hold is released.
	TypePayoutFailed Type = "payout.failed"
	// TypePayoutCanceled: its client canceled the payout before it reached
	// the PSP; nothing was ever held.
	TypePayoutCanceled Type = "payout.canceled"
	// TypePayoutNeedsReview: the PSP's outcome is unknown. The money is
	// still held, nothing is final: a payout.succeeded or payout.failed
	// follows once the PSP's own record (or an operator holding it) says.
	TypePayoutNeedsReview Type = "payout.needs_review"
	// TypePayoutReversed: a paid payout came back (returned by the bank,
	// reversed by the PSP); its amount is back in the wallet.
	TypePayoutReversed Type = "payout.reversed"
	// TypePayoutPartiallyReversed: part of a paid payout came back (a
	// partial reversal of its Stripe transfer); that part (amount) is back
	// in the wallet and the payout stays SUCCEEDED for the rest. Each part
	// is one event; a reversal of the rest is a payout.reversed.
	TypePayoutPartiallyReversed Type = "payout.partially_reversed"
	// TypeRefundPosted: a refund of a credited payment was debited.
	TypeRefundPosted Type = "refund.posted"
	// TypeRefundReversed: a refund posted before failed at the PSP; its
	// amount is back in the wallet.
	TypeRefundReversed Type = "refund.reversed"
	// TypeDisputeOpened: a dispute froze its amount (the disputes account).
	TypeDisputeOpened Type = "dispute.opened"
	// TypeDisputeWon: the dispute closed in our favour; the amount is released.
	TypeDisputeWon Type = "dispute.won"
	// TypeDisputeLost: the dispute closed against us; the amount left for good.
	TypeDisputeLost Type = "dispute.lost"
)

// SettlementTypes lists every event type published on aegis.settlements.
func SettlementTypes() []Type {
	return []Type{TypePayoutSucceeded, TypePayoutFailed, TypePayoutCanceled, TypePayoutNeedsReview,
		TypePayoutReversed, TypePayoutPartiallyReversed, TypeRefundPosted, TypeRefundReversed, TypeDisputeOpened, TypeDisputeWon, TypeDisputeLost}
}

// Settlement is the envelope every aegis.settlements event starts with
// (schema envelope.json). EventID is stable for one outcome: a consumer
// deduplicates on it, and a replayed event carries it unchanged.
type Settlement struct {
	SchemaVersion string    `json:"schema_version"`
	EventID       string    `json:"event_id"`
	Type          Type      `json:"type"`
	OccurredAt    time.Time `json:"occurred_at"`
	UserID        string    `json:"user_id"`
	// Amount is in the currency's minor units (cents, kobo).
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Provider string `json:"provider"`
}

// PayoutOutcome reports a payout's outcome on aegis.settlements (schema
// payout.json and its payout.* types). Build it with NewPayoutOutcome,
// which fills the envelope the schema requires.
type PayoutOutcome struct {
	Settlement
	PayoutID string `json:"payout_id"`
	// Status is the payout's state after the outcome.
	Status string `json:"status"`
	// PSPReference is the PSP's payout/transfer id, once known.
	PSPReference string `json:"psp_reference,omitempty"`
	Error        string `json:"error,omitempty"`
	// ReversedTotal is, for payout.partially_reversed, what the PSP has
	// taken back of the payout so far (Amount is this part).
	ReversedTotal int64 `json:"reversed_total,omitempty"`
}

// NewPayoutOutcome builds a payout outcome event of type typ; its event id
// is PayoutOutcomeID(payoutID, status).
func NewPayoutOutcome(typ Type, payoutID, status, userID string, amount int64, currency, provider string, at time.Time) PayoutOutcome {
	return PayoutOutcome{
		Settlement: Settlement{SchemaVersion: SettlementSchemaVersion, EventID: PayoutOutcomeID(payoutID, status), Type: typ,
			OccurredAt: at.UTC(), UserID: userID, Amount: amount, Currency: currency, Provider: provider},
		PayoutID: payoutID, Status: status,
	}
}

// NewPayoutPartReturn builds the payout.partially_reversed event of a
// partial reversal of payout payoutID: part is what this reversal gave back,
// reversedTotal what the PSP has taken back in all; its event id is
// PayoutPartReturnID(payoutID, reversedTotal).
func NewPayoutPartReturn(payoutID, userID string, part, reversedTotal int64, currency, provider string, at time.Time) PayoutOutcome {
	o := NewPayoutOutcome(TypePayoutPartiallyReversed, payoutID, string(payoutstate.Succeeded), userID, part, currency, provider, at)
	o.EventID, o.ReversedTotal = PayoutPartReturnID(payoutID, reversedTotal), reversedTotal
	return o
}

// ReturnPosted reports one ledger posting for a refund or dispute object on
// aegis.settlements (schema return.json and its refund.* and dispute.*
// types): one event per transition of the object, never two.
type ReturnPosted struct {
	Settlement
	// ObjectID is the PSP's id of the refund or dispute.
	ObjectID string `json:"object_id"`
	// PaymentReference is the PSP's id of the payment it takes money back from.
	PaymentReference string `json:"payment_reference"`
	// PSPEventID is the PSP event that was the evidence for the posting.
	PSPEventID string `json:"psp_event_id,omitempty"`
	// Owed is the part of the amount the wallet could not cover, recorded
	// as a receivable the wallet owes (refund.posted, dispute.opened).
	Owed int64 `json:"owed,omitempty"`
}

// NewReturnPosted builds the event for ledger posting postingKind (a ledger
// transaction kind: refund, dispute_hold, ...) of the provider's refund or
// dispute objectID; its event id is ReturnPostedID.
func NewReturnPosted(typ Type, provider, postingKind, objectID, userID string, amount int64, currency string, at time.Time) ReturnPosted {
	return ReturnPosted{
		Settlement: Settlement{SchemaVersion: SettlementSchemaVersion, EventID: ReturnPostedID(provider, postingKind, objectID),
			Type: typ, OccurredAt: at.UTC(), UserID: userID, Amount: amount, Currency: currency, Provider: provider},
		ObjectID: objectID,
	}
}
