package event

import (
	"encoding/json"
	"time"
)

// Action is what a PSP event asks the ledger to do. webhook-api derives it
// when it normalises the PSP's own event type; the worker acts on it alone.
type Action string

const (
	// ActionCredit credits a wallet for a successful payment.
	ActionCredit Action = "credit"
	// ActionPayoutPaid finalises a payout as paid.
	ActionPayoutPaid Action = "payout_paid"
	// ActionPayoutFailed finalises a payout as failed (hold reversed).
	ActionPayoutFailed Action = "payout_failed"
	// ActionPayoutReversed is a paid payout coming back (Paystack transfer.reversed).
	ActionPayoutReversed Action = "payout_reversed"
	// ActionRefund is money paid back to the payer of a payment we credited
	// (a refund object: Stripe refund.*, charge.refunded; Paystack refund.*).
	ActionRefund Action = "refund"
	// ActionDispute is a chargeback on a payment we credited (Stripe
	// charge.dispute.*, Paystack charge.dispute.*).
	ActionDispute Action = "dispute"
	// ActionNone is stored and published for the record; no money moves.
	ActionNone Action = "none"
)

// Outcomes of a refund or dispute object, as the normaliser reads them from
// the PSP's own status. The worker acts on these, never on PSP statuses.
const (
	// OutcomeRefunded: the refund stands (pending or succeeded at the PSP).
	OutcomeRefunded = "refunded"
	// OutcomeRefundVoid: the refund failed or was canceled; no money left.
	OutcomeRefundVoid = "void"
	// OutcomeDisputeOpen: the disputed amount is frozen while it runs.
	OutcomeDisputeOpen = "open"
	// OutcomeDisputeWon: the dispute closed in our favour; the money stays.
	OutcomeDisputeWon = "won"
	// OutcomeDisputeLost: the dispute closed against us; the money left.
	OutcomeDisputeLost = "lost"
)

// Return is one refund or dispute object an event reports.
type Return struct {
	// ID is the PSP's id of the refund or dispute.
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	// Outcome is one of the Outcome constants.
	Outcome string `json:"outcome"`
}

// PSPEvent is a verified PSP webhook in one provider-neutral envelope,
// published on aegis.webhook.pending.
type PSPEvent struct {
	Provider string `json:"provider"`
	EventID  string `json:"event_id"`
	Type     string `json:"type"`
	Action   Action `json:"action"`
	UserID   string `json:"user_id,omitempty"`
	Amount   int64  `json:"amount,omitempty"`
	Currency string `json:"currency,omitempty"`
	// Reference is the PSP's id of the money movement the event is about: the
	// payment (a Stripe PaymentIntent, or the charge when it has none; a
	// Paystack transaction reference) or the payout/transfer. Two events about
	// one payment (Stripe sends charge.succeeded and payment_intent.succeeded)
	// share it, which is what keeps them from crediting twice.
	Reference string `json:"reference,omitempty"`
	// PayoutID is our payout id, for payout outcome events.
	PayoutID string `json:"payout_id,omitempty"`
	// ObjectStatus is the PSP object's status as the event reports it.
	ObjectStatus string `json:"object_status,omitempty"`
	FailureCode  string `json:"failure_code,omitempty"`
	// Fee is, for ActionCredit, what the PSP kept of the payment when the
	// event says (Paystack charge.success data.fees): the platform's cost,
	// posted apart; the wallet is credited the whole Amount.
	Fee int64 `json:"fee,omitempty"`
	// Reversed is, for ActionPayoutReversed, how much of the payout's
	// Amount the PSP has taken back so far, all reversals together (a
	// Stripe transfer's amount_reversed): less than Amount for a partial
	// reversal. 0 means all of it (Paystack reverses whole transfers).
	Reversed int64 `json:"reversed,omitempty"`
	// Account is the connected account a Stripe event came from (Connect);
	// empty for events about our own account. An outcome event from a
	// connected account is never about one of our payouts.
	Account string `json:"account,omitempty"`
	// Livemode is Stripe's livemode flag (nil for providers without one):
	// a test-mode event is never evidence for a live-mode payout, nor the
	// other way round.
	Livemode *bool `json:"livemode,omitempty"`
	// Returns are the refund or dispute objects of an ActionRefund or
	// ActionDispute event (Stripe's charge.refunded lists several); Reference
	// is then the payment they take money back from.
	Returns []Return `json:"returns,omitempty"`
	// Stale is set when the PSP had already told us something newer about
	// the same object: the event is kept for the record and changes nothing.
	Stale      bool            `json:"stale,omitempty"`
	OccurredAt time.Time       `json:"occurred_at"`
	Raw        json.RawMessage `json:"raw"`
}

// Payout command event type (aegis.transactions).
const TypePayoutRequested Type = "payout.requested"

// PayoutRequested asks the worker to (re)attempt a payout, published on
// aegis.transactions. The payouts row is the source of truth; the command
// only names it and the attempt it stands for.
type PayoutRequested struct {
	PayoutID string `json:"payout_id"`
	UserID   string `json:"user_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Provider string `json:"provider"`
	// Attempt is 0 for the client's request and n for the nth scheduled retry.
	Attempt int `json:"attempt"`
}
