package psp

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Paystack's refunds and disputes as its API lists them: GET /refund and
// GET /dispute, the record the PSP reconciliation reads to recover a
// refund.processed / refund.failed or charge.dispute.create / resolve
// webhook that never came. Both take perPage (default 50, at most 100),
// page (from 1), from / to (on the creation time) and answer newest first
// with Paystack's meta block; GET /refund also filters on reference (the
// transaction) and currency, GET /dispute on transaction (its id) and
// status. Both are scoped to the payments the stand-in was told of (like
// GET /transaction, not per secret key).

// paystackTxnRef is the transaction block a refund or dispute carries.
func paystackTxnRef(p *payment) map[string]any {
	id, _ := strconv.ParseInt(p.chargeID, 10, 64)
	return map[string]any{"id": id, "reference": p.rec.ID, "amount": p.rec.Amount,
		"currency": strings.ToUpper(p.rec.Currency), "status": "success"}
}

// paystackRefundStatus is Paystack's refund status for ours.
func paystackRefundStatus(r ReturnRecord) string {
	if r.Status == "failed" {
		return "failed"
	}
	return "processed"
}

// paystackRefundObject renders a refund as GET /refund lists it. Its id is
// the id its refund.* webhook carries (data.id and refund_reference), so
// the event the reconciliation renders from it has the webhook's identity.
func paystackRefundObject(p *payment, r ReturnRecord) map[string]any {
	at := paystackTime(r.updated)
	return map[string]any{
		"id": r.ID, "refund_reference": r.ID, "integration": 0, "domain": "test",
		"transaction": paystackTxnRef(p), "dispute": nil, "settlement": nil,
		"amount": r.Amount, "deducted_amount": r.Amount, "fully_deducted": true,
		"currency": strings.ToUpper(p.rec.Currency), "channel": "card", "status": paystackRefundStatus(r),
		"refunded_by": "aegis-psp", "refunded_at": at, "expected_at": at,
		"customer_note": "", "merchant_note": "",
		"createdAt": paystackTime(r.created), "updatedAt": at,
	}
}

// paystackDisputeObject renders a dispute as GET /dispute lists it:
// awaiting-merchant-feedback while open; resolved with resolution
// merchant-accepted (lost) or declined (won).
func paystackDisputeObject(p *payment, d ReturnRecord) map[string]any {
	id, _ := strconv.ParseInt(d.ID, 10, 64)
	o := map[string]any{
		"id": id, "refund_amount": d.Amount, "currency": strings.ToUpper(p.rec.Currency),
		"status": "awaiting-merchant-feedback", "resolution": nil, "domain": "test", "category": "chargeback",
		"transaction": paystackTxnRef(p), "transaction_reference": nil,
		"dueAt": paystackTime(d.created.Add(16 * time.Hour)), "resolvedAt": nil,
		"createdAt": paystackTime(d.created), "updatedAt": paystackTime(d.updated),
	}
	if d.Status == "won" || d.Status == "lost" {
		o["status"] = "resolved"
		o["resolution"] = map[string]string{"won": "declined", "lost": "merchant-accepted"}[d.Status]
		o["resolvedAt"] = paystackTime(d.updated)
	}
	return o
}

type listedReturn struct {
	created time.Time
	seq     int
	obj     map[string]any
}

// newestFirst orders listed objects by creation time, newest first (ties:
// the later created first).
func newestFirst(items []listedReturn) []any {
	sort.SliceStable(items, func(i, j int) bool {
		if !items[i].created.Equal(items[j].created) {
			return items[i].created.After(items[j].created)
		}
		return items[i].seq > items[j].seq
	})
	out := make([]any, 0, len(items))
	for _, it := range items {
		out = append(out, it.obj)
	}
	return out
}

// handlePaystackRefundList serves GET /refund.
func (s *Server) handlePaystackRefundList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ref, currency := q.Get("reference"), strings.ToLower(q.Get("currency"))
	s.paystackList(w, r, "Refunds retrieved", func(st *state, _ string, l paystackListQuery) []any {
		var items []listedReturn
		for _, p := range st.paymentOrder {
			if p.rec.Provider != ProviderPaystack || (ref != "" && ref != p.rec.ID && ref != p.chargeID) ||
				(currency != "" && currency != p.rec.Currency) {
				continue
			}
			for _, rr := range p.rec.Refunds {
				if l.keep(rr.created, paystackRefundStatus(rr)) {
					items = append(items, listedReturn{created: rr.created, seq: len(items), obj: paystackRefundObject(p, rr)})
				}
			}
		}
		return newestFirst(items)
	})
}

// handlePaystackDisputeList serves GET /dispute.
func (s *Server) handlePaystackDisputeList(w http.ResponseWriter, r *http.Request) {
	txn := r.URL.Query().Get("transaction")
	s.paystackList(w, r, "Disputes retrieved", func(st *state, _ string, l paystackListQuery) []any {
		var items []listedReturn
		for _, p := range st.paymentOrder {
			if p.rec.Provider != ProviderPaystack || (txn != "" && txn != p.chargeID) {
				continue
			}
			for _, d := range p.rec.Disputes {
				obj := paystackDisputeObject(p, d)
				if l.keep(d.created, obj["status"].(string)) {
					items = append(items, listedReturn{created: d.created, seq: len(items), obj: obj})
				}
			}
		}
		return newestFirst(items)
	})
}
