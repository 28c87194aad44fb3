package psp

import (
	"net/http"
	"strings"
)

// Stripe charges and refunds as Stripe renders them: a payment the
// stand-in was told of (POST /_psp/payments) is a PaymentIntent whose
// latest_charge is a card charge; GET /v1/charges/{id} reads that charge,
// with its balance_transaction (the txn_ id, unexpanded) and its refunds.
// The payment_intent.succeeded event names the charge in latest_charge;
// refund events carry the refund's balance_transaction (and, once it has
// failed, its failure_balance_transaction).

// stripeRefundObject renders a Stripe refund of p as it is in rr.
func stripeRefundObject(p *payment, rr ReturnRecord) map[string]any {
	var failure any
	if rr.failureTxn != "" {
		failure = rr.failureTxn
	}
	return map[string]any{"id": rr.ID, "object": "refund", "amount": rr.Amount, "currency": p.rec.Currency,
		"status": rr.Status, "charge": p.chargeID, "payment_intent": p.rec.ID, "created": rr.created.Unix(),
		"balance_transaction": rr.txn, "failure_balance_transaction": failure}
}

// stripeCharge is Stripe's charge object (a card payment that succeeded).
type stripeCharge struct {
	ID                            string            `json:"id"`
	Object                        string            `json:"object"`
	Amount                        int64             `json:"amount"`
	AmountCaptured                int64             `json:"amount_captured"`
	AmountRefunded                int64             `json:"amount_refunded"`
	Application                   *string           `json:"application"`
	ApplicationFee                *string           `json:"application_fee"`
	ApplicationFeeAmount          *int64            `json:"application_fee_amount"`
	BalanceTransaction            string            `json:"balance_transaction"`
	BillingDetails                map[string]any    `json:"billing_details"`
	CalculatedStatementDescriptor *string           `json:"calculated_statement_descriptor"`
	Captured                      bool              `json:"captured"`
	Created                       int64             `json:"created"`
	Currency                      string            `json:"currency"`
	Customer                      *string           `json:"customer"`
	Description                   *string           `json:"description"`
	Disputed                      bool              `json:"disputed"`
	FailureBalanceTransaction     *string           `json:"failure_balance_transaction"`
	FailureCode                   *string           `json:"failure_code"`
	FailureMessage                *string           `json:"failure_message"`
	FraudDetails                  map[string]string `json:"fraud_details"`
	Livemode                      bool              `json:"livemode"`
	Metadata                      map[string]string `json:"metadata"`
	OnBehalfOf                    *string           `json:"on_behalf_of"`
	Outcome                       map[string]any    `json:"outcome"`
	Paid                          bool              `json:"paid"`
	PaymentIntent                 string            `json:"payment_intent"`
	PaymentMethod                 string            `json:"payment_method"`
	PaymentMethodDetails          map[string]any    `json:"payment_method_details"`
	ReceiptEmail                  *string           `json:"receipt_email"`
	ReceiptNumber                 *string           `json:"receipt_number"`
	ReceiptURL                    *string           `json:"receipt_url"`
	Refunded                      bool              `json:"refunded"`
	Refunds                       stripeList        `json:"refunds"`
	Review                        *string           `json:"review"`
	Shipping                      map[string]any    `json:"shipping"`
	SourceTransfer                *string           `json:"source_transfer"`
	StatementDescriptor           *string           `json:"statement_descriptor"`
	StatementDescriptorSuffix     *string           `json:"statement_descriptor_suffix"`
	Status                        string            `json:"status"`
	TransferData                  map[string]any    `json:"transfer_data"`
	TransferGroup                 *string           `json:"transfer_group"`
}

// stripeChargeOf renders p's charge as it is now: refunds newest first.
func stripeChargeOf(p *payment) stripeCharge {
	refunds := stripeList{Object: "list", Data: []any{}, URL: "/v1/charges/" + p.chargeID + "/refunds"}
	var refunded int64
	for i := len(p.rec.Refunds) - 1; i >= 0; i-- {
		rr := p.rec.Refunds[i]
		if rr.Status != "failed" {
			refunded += rr.Amount
		}
		refunds.Data = append(refunds.Data, stripeRefundObject(p, rr))
	}
	refunds.TotalCount = len(refunds.Data)
	card := map[string]any{"brand": "visa", "country": "US", "exp_month": 12, "exp_year": p.created.Year() + 3,
		"fingerprint": digits("fp"+p.chargeID, 16), "funding": "credit", "last4": "4242", "network": "visa"}
	return stripeCharge{
		ID: p.chargeID, Object: "charge", Amount: p.rec.Amount, AmountCaptured: p.rec.Amount, AmountRefunded: refunded,
		BalanceTransaction: p.txn,
		BillingDetails: map[string]any{"address": map[string]any{"city": nil, "country": nil, "line1": nil, "line2": nil,
			"postal_code": nil, "state": nil}, "email": nil, "name": nil, "phone": nil},
		Captured: true, Created: p.created.Unix(), Currency: p.rec.Currency, Disputed: len(p.rec.Disputes) > 0,
		FraudDetails: map[string]string{}, Metadata: map[string]string{"user_id": p.rec.UserID},
		Outcome: map[string]any{"network_status": "approved_by_network", "reason": nil, "risk_level": "normal",
			"seller_message": "Payment complete.", "type": "authorized"},
		Paid: true, PaymentIntent: p.rec.ID, PaymentMethod: "pm_" + strings.TrimPrefix(p.chargeID, "ch_"),
		PaymentMethodDetails: map[string]any{"card": card, "type": "card"},
		Refunded:             refunded == p.rec.Amount, Refunds: refunds, Status: "succeeded",
	}
}

// handleStripeCharge serves GET /v1/charges/{id}: the platform's charges
// (a connected account has none).
func (s *Server) handleStripeCharge(w http.ResponseWriter, r *http.Request) {
	_, call, account, ok := s.beginStripeRead(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if bad := onlyQuery(r); bad != nil {
		s.respond(w, call, *bad)
		return
	}
	s.mu.Lock()
	var body []byte
	if p := s.st.charges[id]; p != nil && account == "" {
		body = mustJSON(stripeChargeOf(p))
	}
	s.mu.Unlock()
	if body == nil {
		s.respond(w, call, resourceMissing("id", "charge", id))
		return
	}
	s.respond(w, call, response{status: http.StatusOK, body: body, outcome: OutcomeOK, objectID: id})
}
