package psp

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Money that goes back: the stand-in can be told of a payment (it sends the
// payment's success webhook, as the PSP would when a customer pays), and
// then to refund it (partially or fully, succeeding or failing) and to
// dispute it (won, lost, or left open until closed), sending each object's
// webhooks signed like the payout events. It refuses, as the PSPs do, to
// refund or dispute more than is left of the payment.

// PaymentRequest is the body of POST /_psp/payments.
type PaymentRequest struct {
	Provider Provider `json:"provider"`
	UserID   string   `json:"user_id"`
	Amount   int64    `json:"amount"`
	Currency string   `json:"currency"`
}

// ReturnRequest is the body of POST /_psp/payments/{id}/refunds and
// /disputes, and of POST /_psp/disputes/{id}/close. Amount 0 is what is left
// of the payment. Outcome: refunds "succeeded" (default) or "failed" (the
// refund is created, then fails); disputes "won", "lost" or "" (left open).
type ReturnRequest struct {
	Amount  int64  `json:"amount"`
	Outcome string `json:"outcome"`
}

// ReturnRecord is one refund or dispute of a payment.
type ReturnRecord struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
	Status string `json:"status"` // refunds: succeeded | failed; disputes: open | won | lost
	// created and updated date the object in Paystack's GET /refund and
	// GET /dispute (their from/to filters and createdAt/updatedAt).
	created, updated time.Time
	// txn and failureTxn are a Stripe refund's balance transactions: the
	// refund's, and the adjustment giving it back if it failed.
	txn, failureTxn string
}

// PaymentRecord is a payment the stand-in knows, as GET /_psp/payments/{id}
// answers it.
type PaymentRecord struct {
	Provider Provider `json:"provider"`
	ID       string   `json:"id"` // Stripe: the PaymentIntent; Paystack: the transaction reference
	UserID   string   `json:"user_id"`
	Amount   int64    `json:"amount"`
	Currency string   `json:"currency"`
	// Charge is the Stripe charge (ch_…) or the Paystack transaction id.
	Charge string `json:"charge"`
	// Fee is what the PSP charged for the payment (fees.go): the Stripe
	// charge's balance transaction fee, or the Paystack transaction's fees.
	// The customer is credited Amount; the fee is the platform's cost.
	Fee      int64          `json:"fee"`
	Refunds  []ReturnRecord `json:"refunds"`
	Disputes []ReturnRecord `json:"disputes"`
}

type payment struct {
	rec      PaymentRecord
	chargeID string // Stripe charge id; Paystack transaction id
	created  time.Time
	// txn is a Stripe charge's balance transaction.
	txn string
	// paystackTxn is a Paystack payment's transaction object.
	paystackTxn map[string]any
}

// left is what can still be refunded or disputed.
func (p *payment) left() int64 {
	n := p.rec.Amount
	for _, r := range p.rec.Refunds {
		if r.Status != "failed" {
			n -= r.Amount
		}
	}
	for _, d := range p.rec.Disputes {
		if d.Status != "won" {
			n -= d.Amount
		}
	}
	return n
}

func (p *payment) view() PaymentRecord {
	r := p.rec
	r.Refunds = append([]ReturnRecord{}, p.rec.Refunds...)
	r.Disputes = append([]ReturnRecord{}, p.rec.Disputes...)
	return r
}

func (s *Server) handlePaymentCreate(w http.ResponseWriter, r *http.Request) {
	var req PaymentRequest
	if !decodeAdmin(w, r, &req) {
		return
	}
	req.Currency = strings.ToLower(req.Currency)
	switch {
	case req.Provider != ProviderStripe && req.Provider != ProviderPaystack:
		writeJSON(w, http.StatusBadRequest, adminError{Error: `provider: want "stripe" or "paystack"`})
		return
	case req.UserID == "" || req.Amount <= 0 || len(req.Currency) != 3:
		writeJSON(w, http.StatusBadRequest, adminError{Error: "user_id, a positive amount and a currency are required"})
		return
	}
	now := time.Now()
	s.mu.Lock()
	st := s.st
	p := &payment{rec: PaymentRecord{Provider: req.Provider, UserID: req.UserID, Amount: req.Amount, Currency: req.Currency,
		Refunds: []ReturnRecord{}, Disputes: []ReturnRecord{}}}
	if req.Provider == ProviderStripe {
		p.rec.ID, p.chargeID = newID("pi_", 24), newID("ch_", 24)
		// Stripe takes its fee from the charge: the platform's balance
		// grows by the net.
		p.rec.Fee = s.cfg.StripeCardFee.of(p.rec.Amount)
		p.txn = st.postStripe(stripeMove{typ: "charge", category: "charge", currency: p.rec.Currency, source: p.chargeID,
			amount: p.rec.Amount, fee: p.rec.Fee}, now)
		st.charges[p.chargeID] = p
		s.stripeEventLocked(st, p.rec.ID, "payment_intent.succeeded", map[string]any{
			"id": p.rec.ID, "object": "payment_intent", "amount": p.rec.Amount, "amount_received": p.rec.Amount,
			"currency": p.rec.Currency, "status": "succeeded", "latest_charge": p.chargeID,
			"metadata": map[string]string{"user_id": p.rec.UserID},
		}, now)
	} else {
		st.paystackSeq++
		p.rec.ID, p.chargeID = newLowerID("T", 14), strconv.FormatInt(st.paystackSeq, 10)
		// Paystack keeps its fees and settles the rest: the
		// integration's balance grows by amount - fees.
		p.rec.Fee = paystackFee(p.rec.Amount, p.rec.Currency)
		st.credit(ProviderPaystack, "", p.rec.Currency, p.rec.Amount-p.rec.Fee)
		// The transaction as GET /transaction lists it and as the
		// charge.success webhook carries it.
		p.paystackTxn = map[string]any{
			"id": st.paystackSeq, "domain": "test", "reference": p.rec.ID, "amount": p.rec.Amount,
			"currency": strings.ToUpper(p.rec.Currency), "status": "success", "gateway_response": "Successful",
			"channel": "card", "paid_at": paystackTime(now), "created_at": paystackTime(now), "createdAt": paystackTime(now),
			"metadata": map[string]string{"user_id": p.rec.UserID}, "fees": p.rec.Fee, "fees_split": nil,
		}
		s.paystackEventLocked(st, p.rec.ID, "charge.success", p.paystackTxn, now)
	}
	p.created = now
	p.rec.Charge = p.chargeID
	st.payments[p.rec.ID] = p
	st.paymentOrder = append(st.paymentOrder, p)
	v := p.view()
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, v)
}

func (s *Server) handlePaymentGet(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	p := s.st.payments[r.PathValue("id")]
	var v PaymentRecord
	if p != nil {
		v = p.view()
	}
	s.mu.Unlock()
	if p == nil {
		writeJSON(w, http.StatusNotFound, adminError{Error: "payment not found"})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) handleRefundCreate(w http.ResponseWriter, r *http.Request) {
	var req ReturnRequest
	if !decodeAdmin(w, r, &req) {
		return
	}
	if req.Outcome == "" {
		req.Outcome = "succeeded"
	}
	if req.Outcome != "succeeded" && req.Outcome != "failed" {
		writeJSON(w, http.StatusBadRequest, adminError{Error: `outcome: want "succeeded" or "failed"`})
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	p, amount, ok := s.returnable(w, st, r.PathValue("id"), req.Amount)
	if !ok {
		return
	}
	rr := ReturnRecord{Amount: amount, Status: req.Outcome, created: now, updated: now}
	if p.rec.Provider == ProviderStripe {
		rr.ID = newID("re_", 24)
		// Stripe: a card refund is created succeeded (or pending), its
		// amount leaving the balance (Stripe keeps its fee); a later
		// failure comes as refund.updated, and an adjustment gives the
		// amount back.
		rr.txn = st.postStripe(stripeMove{typ: "refund", category: "refund", currency: p.rec.Currency, source: rr.ID,
			amount: -amount}, now)
		created := rr
		created.Status = "succeeded"
		s.stripeEventLocked(st, rr.ID, "refund.created", stripeRefundObject(p, created), now)
		if req.Outcome == "failed" {
			rr.failureTxn = st.postStripe(stripeMove{typ: "adjustment", category: "refund_failure", currency: p.rec.Currency,
				source: rr.ID, amount: amount}, now)
			s.stripeEventLocked(st, rr.ID, "refund.updated", stripeRefundObject(p, rr), now)
		}
	} else {
		rr.ID = newLowerID("rf_", 12)
		typ, status := "refund.processed", "processed"
		if req.Outcome == "failed" {
			typ, status = "refund.failed", "failed"
		} else {
			// The refunded amount leaves the integration's balance
			// (never refused for it: the stand-in does not model a
			// refund waiting for funds).
			st.debit(ProviderPaystack, "", p.rec.Currency, amount, true)
		}
		s.paystackEventLocked(st, rr.ID, typ, map[string]any{
			"id": rr.ID, "refund_reference": rr.ID, "transaction_reference": p.rec.ID, "amount": strconv.FormatInt(amount, 10),
			"currency": strings.ToUpper(p.rec.Currency), "status": status,
		}, now)
	}
	p.rec.Refunds = append(p.rec.Refunds, rr)
	writeJSON(w, http.StatusCreated, rr)
}

func (s *Server) handleDisputeCreate(w http.ResponseWriter, r *http.Request) {
	var req ReturnRequest
	if !decodeAdmin(w, r, &req) {
		return
	}
	if req.Outcome != "" && req.Outcome != "won" && req.Outcome != "lost" {
		writeJSON(w, http.StatusBadRequest, adminError{Error: `outcome: want "won", "lost" or "" (left open)`})
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	p, amount, ok := s.returnable(w, st, r.PathValue("id"), req.Amount)
	if !ok {
		return
	}
	d := ReturnRecord{Amount: amount, Status: "open", created: now, updated: now}
	if p.rec.Provider == ProviderStripe {
		d.ID = newID("dp_", 24)
	} else {
		st.paystackSeq++
		d.ID = strconv.FormatInt(st.paystackSeq, 10)
	}
	s.disputeEventLocked(st, p, d, now)
	p.rec.Disputes = append(p.rec.Disputes, d)
	st.disputes[d.ID] = p
	if req.Outcome != "" {
		d = s.closeDisputeLocked(st, p, len(p.rec.Disputes)-1, req.Outcome, now)
	}
	writeJSON(w, http.StatusCreated, d)
}

func (s *Server) handleDisputeClose(w http.ResponseWriter, r *http.Request) {
	var req ReturnRequest
	if !decodeAdmin(w, r, &req) {
		return
	}
	if req.Outcome != "won" && req.Outcome != "lost" {
		writeJSON(w, http.StatusBadRequest, adminError{Error: `outcome: want "won" or "lost"`})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	id := r.PathValue("id")
	p := st.disputes[id]
	if p == nil {
		writeJSON(w, http.StatusNotFound, adminError{Error: "dispute not found"})
		return
	}
	for i, d := range p.rec.Disputes {
		if d.ID != id {
			continue
		}
		if d.Status != "open" {
			writeJSON(w, http.StatusConflict, adminError{Error: "dispute already closed as " + d.Status})
			return
		}
		writeJSON(w, http.StatusOK, s.closeDisputeLocked(st, p, i, req.Outcome, time.Now()))
		return
	}
}

// returnable finds the payment and the amount to take back (0: the rest),
// answering the error itself when there is none.
func (s *Server) returnable(w http.ResponseWriter, st *state, id string, amount int64) (*payment, int64, bool) {
	p := st.payments[id]
	if p == nil {
		writeJSON(w, http.StatusNotFound, adminError{Error: "payment not found"})
		return nil, 0, false
	}
	left := p.left()
	if amount == 0 {
		amount = left
	}
	if amount <= 0 || amount > left {
		writeJSON(w, http.StatusBadRequest, adminError{Error: "amount must be positive and at most what is left of the payment (" +
			strconv.FormatInt(left, 10) + ")"})
		return nil, 0, false
	}
	return p, amount, true
}

func (s *Server) closeDisputeLocked(st *state, p *payment, i int, outcome string, now time.Time) ReturnRecord {
	p.rec.Disputes[i].Status = outcome
	p.rec.Disputes[i].updated = now
	d := p.rec.Disputes[i]
	s.disputeEventLocked(st, p, d, now)
	return d
}

// disputeEventLocked sends the event for the dispute's current status.
func (s *Server) disputeEventLocked(st *state, p *payment, d ReturnRecord, now time.Time) {
	if p.rec.Provider == ProviderStripe {
		typ, status := "charge.dispute.created", "needs_response"
		if d.Status != "open" {
			typ, status = "charge.dispute.closed", d.Status
		}
		s.stripeEventLocked(st, d.ID, typ, map[string]any{"id": d.ID, "object": "dispute", "amount": d.Amount,
			"currency": p.rec.Currency, "status": status, "charge": p.chargeID, "payment_intent": p.rec.ID}, now)
		return
	}
	data := map[string]any{"id": d.ID, "refund_amount": d.Amount, "currency": strings.ToUpper(p.rec.Currency),
		"status":      "awaiting-merchant-feedback",
		"transaction": map[string]any{"reference": p.rec.ID, "amount": p.rec.Amount, "currency": strings.ToUpper(p.rec.Currency)}}
	typ := "charge.dispute.create"
	if d.Status != "open" {
		typ, data["status"] = "charge.dispute.resolve", "resolved"
		data["resolution"] = map[string]string{"won": "declined", "lost": "merchant-accepted"}[d.Status]
	}
	s.paystackEventLocked(st, d.ID, typ, data, now)
}

func (s *Server) stripeEventLocked(st *state, objectID, typ string, obj any, now time.Time) {
	id, body := s.recordStripeEventLocked(st, typ, "", obj, now)
	if s.cfg.StripeWebhookURL == "" {
		return
	}
	s.sendOrDropLocked(st, s.deliverLocked(st, ProviderStripe, objectID, id, typ, s.cfg.StripeWebhookURL, body, now), now)
}

func (s *Server) paystackEventLocked(st *state, objectID, typ string, data any, now time.Time) {
	if s.cfg.PaystackWebhookURL == "" {
		return
	}
	body := mustJSON(paystackEvent{Event: typ, Data: data})
	s.sendOrDropLocked(st, s.deliverLocked(st, ProviderPaystack, objectID, objectID+":"+typ, typ, s.cfg.PaystackWebhookURL, body, now), now)
}

// sendOrDropLocked schedules a payment, refund or dispute webhook, or
// records it as dropped (fault drop_payment_webhook_rate).
func (s *Server) sendOrDropLocked(st *state, d *delivery, now time.Time) {
	if r := s.faults[d.provider].spec.DropPaymentWebhookRate; r > 0 && s.rng.Float64() < r {
		d.rec.State = DeliveryDropped
		s.log.Warn("webhook dropped (fault drop_payment_webhook_rate)", slog.String("event_id", d.rec.EventID),
			slog.String("type", d.rec.Type), slog.String("object_id", d.rec.ObjectID))
		return
	}
	s.scheduleLocked(st, d, now)
}

func decodeAdmin(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := readBody(w, r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, adminError{Error: err.Error()})
		return false
	}
	if len(body) == 0 {
		return true
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeJSON(w, http.StatusBadRequest, adminError{Error: "invalid JSON: " + err.Error()})
		return false
	}
	return true
}
