package event

// Type is an event type: a PSP webhook type Aegis acts on, or the type of an
// event Aegis publishes on its own topics (the event_type header and the
// outbox/dead-letter event_type column). Code names them by constant, never
// by string literal, so a renamed or misspelt type fails to compile.
//
// There is no SQL CHECK on event_type (outbox, dead_letters, webhook_events):
// those columns also record PSP types Aegis stores without acting on, which
// no list can name. The lists below are tied instead to the aegis.settlements
// JSON schemas' enum (schema's tests) and to what the webhook normaliser acts
// on (webhook-api ingest's tests).
type Type string

// String returns the type's name.
func (t Type) String() string { return string(t) }

// Stripe webhook types the normaliser acts on (any other type is stored and
// published with ActionNone).
const (
	StripePaymentIntentSucceeded Type = "payment_intent.succeeded"
	StripeChargeSucceeded        Type = "charge.succeeded"
	StripeChargeRefunded         Type = "charge.refunded"
	StripeChargeRefundUpdated    Type = "charge.refund.updated"
	StripeRefundCreated          Type = "refund.created"
	StripeRefundUpdated          Type = "refund.updated"
	StripeDisputeCreated         Type = "charge.dispute.created"
	StripeDisputeUpdated         Type = "charge.dispute.updated"
	StripeDisputeClosed          Type = "charge.dispute.closed"
	StripeTransferCreated        Type = "transfer.created"
	StripeTransferReversed       Type = "transfer.reversed"
	StripePayoutPaid             Type = "payout.paid"
	StripePayoutFailed           Type = "payout.failed"
	StripePayoutCanceled         Type = "payout.canceled"
	StripePayoutUpdated          Type = "payout.updated"
)

// StripeTypes lists the Stripe webhook types the normaliser gives an action
// (transfer.created is sent by Stripe and carries none).
func StripeTypes() []Type {
	return []Type{StripePaymentIntentSucceeded, StripeChargeSucceeded, StripeChargeRefunded, StripeChargeRefundUpdated,
		StripeRefundCreated, StripeRefundUpdated, StripeDisputeCreated, StripeDisputeUpdated, StripeDisputeClosed,
		StripeTransferReversed, StripePayoutPaid, StripePayoutFailed, StripePayoutCanceled, StripePayoutUpdated}
}

// Paystack webhook types (its "event" field) the normaliser acts on.
const (
	PaystackChargeSuccess    Type = "charge.success"
	PaystackTransferSuccess  Type = "transfer.success"
	PaystackTransferFailed   Type = "transfer.failed"
	PaystackTransferReversed Type = "transfer.reversed"
	PaystackRefundProcessed  Type = "refund.processed"
	PaystackRefundFailed     Type = "refund.failed"
	PaystackDisputeCreate    Type = "charge.dispute.create"
	PaystackDisputeResolve   Type = "charge.dispute.resolve"
)

// PaystackTypes lists the Paystack webhook types the normaliser gives an action.
func PaystackTypes() []Type {
	return []Type{PaystackChargeSuccess, PaystackTransferSuccess, PaystackTransferFailed, PaystackTransferReversed,
		PaystackRefundProcessed, PaystackRefundFailed, PaystackDisputeCreate, PaystackDisputeResolve}
}

// CommandTypes lists the event types of the commands on aegis.transactions.
func CommandTypes() []Type { return []Type{TypePayoutRequested, TypePayoutResolution} }
