package psp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Stripe transfers as Stripe has them: a transfer has no status; it moved
// the money when it was created. A reversal (whole or partial, as many as
// the amount allows) moves money back from the destination to the balance
// the transfer was made from and is announced by transfer.reversed (Stripe
// sends it for partial reversals too); reversed turns true once the whole
// amount is reversed. transfer.updated announces a change of description
// or metadata (POST /v1/transfers/{id}), the only change Stripe sends it
// for.
//
// The stand-in also keeps its earlier record of transfers settling
// pending → paid | failed (GET /_psp/objects, never in the API): a transfer
// that settles failed (acct_fail*, or POST /_psp/objects/{id}/settle) is
// reversed for what is left of it, as if Stripe took the money back.

// stripeReversal is Stripe's transfer_reversal object.
type stripeReversal struct {
	ID                       string            `json:"id"`
	Object                   string            `json:"object"`
	Amount                   int64             `json:"amount"`
	BalanceTransaction       *string           `json:"balance_transaction"`
	Created                  int64             `json:"created"`
	Currency                 string            `json:"currency"`
	DestinationPaymentRefund *string           `json:"destination_payment_refund"`
	Metadata                 map[string]string `json:"metadata"`
	SourceRefund             *string           `json:"source_refund"`
	Transfer                 string            `json:"transfer"`
}

// embeddedReversals is how many reversals a transfer object embeds.
const embeddedReversals = 10

// renderReversals sets the Reversals list from the reversals made.
func (t *stripeTransfer) renderReversals() {
	shown := t.reversals[:min(len(t.reversals), embeddedReversals)]
	data := make([]any, 0, len(shown))
	for _, rv := range shown {
		data = append(data, rv)
	}
	t.Reversals = stripeList{Object: "list", Data: data, HasMore: len(t.reversals) > len(shown),
		TotalCount: len(t.reversals), URL: "/v1/transfers/" + t.ID + "/reversals"}
}

// reverseTransferLocked reverses amount (0: what is left) of o, a Stripe
// transfer: the money goes from the destination's balance back to the
// balance the transfer was made from, and transfer.reversed is sent. A
// reversal the platform asks for needs the destination to hold the
// amount; force (Stripe taking the money back) does not.
func (s *Server) reverseTransferLocked(st *state, o *object, amount int64, metadata map[string]string, force bool, now time.Time) (*stripeReversal, *paramError) {
	t := o.stripeTransfer
	left := t.Amount - t.AmountReversed
	switch {
	case left <= 0:
		return nil, &paramError{msg: fmt.Sprintf("Transfer %s has already been fully reversed.", t.ID)}
	case amount == 0:
		amount = left
	case amount > left:
		return nil, &paramError{code: "parameter_invalid_integer", param: "amount",
			msg: fmt.Sprintf("You cannot reverse %d: only %d of transfer %s is left to reverse.", amount, left, t.ID)}
	}
	if !force && st.balance(ProviderStripe, t.Destination, t.Currency) < amount {
		return nil, &paramError{code: "balance_insufficient",
			msg: fmt.Sprintf("The destination account %s does not have enough balance to cover the reversal.", t.Destination)}
	}
	if metadata == nil {
		metadata = map[string]string{}
	}
	txn, refund := newID("txn_", 24), newID("pyr_", 24)
	rv := &stripeReversal{ID: newID("trr_", 24), Object: "transfer_reversal", Amount: amount, BalanceTransaction: &txn,
		Created: now.Unix(), Currency: t.Currency, DestinationPaymentRefund: &refund, Metadata: metadata, Transfer: t.ID}
	// The money goes back from the destination to the balance the
	// transfer was made from.
	st.postStripe(stripeMove{account: t.Destination, typ: "payment_refund", category: "refund",
		currency: t.Currency, source: refund, amount: -amount}, now)
	st.postStripe(stripeMove{id: txn, account: o.rec.Account, typ: "transfer_refund", category: "transfer_reversal",
		currency: t.Currency, source: rv.ID, amount: amount}, now)
	t.reversals = append([]*stripeReversal{rv}, t.reversals...)
	t.AmountReversed += amount
	t.Reversed = t.AmountReversed == t.Amount
	t.renderReversals()
	o.rec.AmountReversed = t.AmountReversed
	if t.Reversed {
		// The record's verdict: all of the money came back.
		o.rec.Status = "failed"
	}
	s.enqueueEventLocked(st, o, "transfer.reversed", now)
	return rv, nil
}

// transferFor finds the transfer id a request acting for account sees.
func transferFor(st *state, id, account string) *object {
	if o := st.byID[id]; stripeVisible(o, KindTransfer, account) {
		return o
	}
	return nil
}

// handleStripeReversalCreate serves POST /v1/transfers/{id}/reversals:
// amount (default: what is left), description, metadata,
// refund_application_fee; the Idempotency-Key is honoured as for creates.
func (s *Server) handleStripeReversalCreate(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.beginStripeCreate(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	op := sc.createOp(r)
	op.exec = func(st *state, draw func() FaultKind) response {
		if perr := unknownParam(sc.form, "amount", "description", "refund_application_fee"); perr != nil {
			return response{status: http.StatusBadRequest, body: perr.body(), outcome: OutcomeInvalid}
		}
		var amount int64
		if raw := sc.form.Get("amount"); raw != "" {
			n, perr := positiveAmount(raw)
			if perr != nil {
				return response{status: http.StatusBadRequest, body: perr.body(), outcome: OutcomeInvalid}
			}
			amount = n
		}
		o := transferFor(st, id, sc.account)
		if o == nil {
			return resourceMissing("id", "transfer", id)
		}
		sc.call.PayoutID = o.rec.PayoutID // s.mu is held
		switch draw() {
		case FaultInvalidAccount:
			return response{status: http.StatusBadRequest, body: stripeAccountInvalid, outcome: OutcomeRejected}
		case FaultInsufficientFunds:
			return response{status: http.StatusBadRequest, body: stripeBalanceInsufficient, outcome: OutcomeRejected}
		}
		rv, perr := s.reverseTransferLocked(st, o, amount, metadataOf(sc.form), false, time.Now())
		if perr != nil {
			return response{status: http.StatusBadRequest, body: perr.body(), outcome: OutcomeRejected}
		}
		return response{status: http.StatusOK, body: mustJSON(rv), outcome: OutcomeCreated, objectID: rv.ID}
	}
	s.runCreate(w, r, op)
}

// handleStripeReversalList serves GET /v1/transfers/{id}/reversals, newest
// first, with limit (1-100, default 10).
func (s *Server) handleStripeReversalList(w http.ResponseWriter, r *http.Request) {
	_, call, account, ok := s.beginStripeRead(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if bad := onlyQuery(r, "limit", "starting_after", "ending_before"); bad != nil {
		s.respond(w, call, *bad)
		return
	}
	limit := 10
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			s.respond(w, call, response{status: http.StatusBadRequest, outcome: OutcomeInvalid,
				body: (&paramError{code: "parameter_invalid_integer", param: "limit", msg: "Limit must be between 1 and 100."}).body()})
			return
		}
		limit = n
	}
	s.mu.Lock()
	o := transferFor(s.st, id, account)
	var body []byte
	if o != nil {
		all := o.stripeTransfer.reversals
		list := stripeList{Object: "list", Data: []any{}, HasMore: len(all) > limit, URL: "/v1/transfers/" + id + "/reversals"}
		for _, rv := range all[:min(limit, len(all))] {
			list.Data = append(list.Data, json.RawMessage(mustJSON(rv)))
		}
		body = mustJSON(list)
	}
	s.mu.Unlock()
	if body == nil {
		s.respond(w, call, resourceMissing("id", "transfer", id))
		return
	}
	s.respond(w, call, response{status: http.StatusOK, body: body, outcome: OutcomeOK, objectID: id})
}

// handleStripeReversalGet serves GET /v1/transfers/{id}/reversals/{reversal}.
func (s *Server) handleStripeReversalGet(w http.ResponseWriter, r *http.Request) {
	_, call, account, ok := s.beginStripeRead(w, r)
	if !ok {
		return
	}
	id, rid := r.PathValue("id"), r.PathValue("reversal")
	s.mu.Lock()
	var body []byte
	if o := transferFor(s.st, id, account); o != nil {
		for _, rv := range o.stripeTransfer.reversals {
			if rv.ID == rid {
				body = mustJSON(rv)
			}
		}
	}
	s.mu.Unlock()
	if body == nil {
		s.respond(w, call, resourceMissing("id", "transfer_reversal", rid))
		return
	}
	s.respond(w, call, response{status: http.StatusOK, body: body, outcome: OutcomeOK, objectID: rid})
}

// handleStripeTransferUpdate serves POST /v1/transfers/{id}: description
// and metadata (an empty value unsets a key), announced by
// transfer.updated. It moves no money, so no fault is drawn for it; its
// Idempotency-Key is honoured as for creates.
func (s *Server) handleStripeTransferUpdate(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.beginStripeCreate(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	op := sc.createOp(r)
	op.faultless = true
	op.exec = func(st *state, _ func() FaultKind) response {
		if perr := unknownParam(sc.form, "description"); perr != nil {
			return response{status: http.StatusBadRequest, body: perr.body(), outcome: OutcomeInvalid}
		}
		o := transferFor(st, id, sc.account)
		if o == nil {
			return resourceMissing("id", "transfer", id)
		}
		t := o.stripeTransfer
		if _, set := sc.form["description"]; set {
			t.Description = optional(sc.form, "description")
		}
		if _, unsetAll := sc.form["metadata"]; unsetAll {
			t.Metadata = map[string]string{}
		}
		for k := range sc.form {
			if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") && len(name) > 1 {
				name = strings.TrimSuffix(name, "]")
				if v := sc.form.Get(k); v == "" {
					delete(t.Metadata, name)
				} else {
					t.Metadata[name] = v
				}
			}
		}
		s.enqueueEventLocked(st, o, "transfer.updated", time.Now())
		return response{status: http.StatusOK, body: mustJSON(t), outcome: OutcomeOK, objectID: id}
	}
	s.runCreate(w, r, op)
}

// ReverseRequest is the body of POST /_psp/objects/{id}/reverse: reverse a
// Stripe transfer as if the platform or Stripe did it (the destination's
// balance may go negative). Amount 0 is what is left.
type ReverseRequest struct {
	Amount int64 `json:"amount"`
}

// ReverseView answers POST /_psp/objects/{id}/reverse.
type ReverseView struct {
	ReversalID string       `json:"reversal_id"`
	Object     ObjectRecord `json:"object"`
}

func (s *Server) handleReverse(w http.ResponseWriter, r *http.Request) {
	var req ReverseRequest
	if !decodeAdmin(w, r, &req) {
		return
	}
	if req.Amount < 0 {
		writeJSON(w, http.StatusBadRequest, adminError{Error: "amount must not be negative"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	o := st.byID[r.PathValue("id")]
	if o == nil || o.stripeTransfer == nil {
		writeJSON(w, http.StatusNotFound, adminError{Error: "no Stripe transfer with that id"})
		return
	}
	rv, perr := s.reverseTransferLocked(st, o, req.Amount, nil, true, time.Now())
	if perr != nil {
		writeJSON(w, http.StatusConflict, adminError{Error: perr.msg})
		return
	}
	writeJSON(w, http.StatusOK, ReverseView{ReversalID: rv.ID, Object: o.record()})
}
