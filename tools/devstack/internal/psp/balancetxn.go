package psp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Stripe balance transactions: every movement of a Stripe balance the
// stand-in models is posted as one, on the balance it moves (the
// platform's, or a connected account's), and the balance moves by its net:
//
//	charge          a payment: +amount, Stripe's fee, net = amount - fee
//	                (reporting_category charge, source the charge)
//	refund          a refund: -amount, no fee returned (refund, source re_)
//	adjustment      a refund that failed gives it back: +amount
//	                (refund_failure, source re_)
//	transfer        a transfer leaves the balance it is made from:
//	                -amount (transfer, source tr_)
//	payment         ... and reaches its destination's: +amount (charge,
//	                source the destination payment py_)
//	transfer_refund a reversal gives it back: +amount (transfer_reversal,
//	                source trr_)
//	payment_refund  ... taking it from the destination: -amount (refund,
//	                source pyr_)
//	payout          a connected account's payout: -amount (payout, po_)
//	payout_failure  ... that failed gives it back: +amount
//	                (payout_reversal, po_)
//
// Objects carry the ids as Stripe does: the charge's, refund's, transfer's,
// reversal's and connected payout's balance_transaction, a failed
// refund's or connected payout's failure_balance_transaction. All are
// "available" at once (available_on = created): the stand-in has no
// pending balance. Platform payouts and disputes move no balance, so they
// post none (a platform payout's balance_transaction id does not resolve).
//
// GET /v1/balance_transactions/{id} reads one; GET /v1/balance_transactions
// lists them newest first with Stripe's parameters (limit, starting_after,
// ending_before, created[...], type, source, payout, currency). Each
// account sees its own, the platform's without Stripe-Account.

// stripeFeeDetail is one entry of a balance transaction's fee_details.
type stripeFeeDetail struct {
	Amount      int64   `json:"amount"`
	Application *string `json:"application"`
	Currency    string  `json:"currency"`
	Description string  `json:"description"`
	Type        string  `json:"type"`
}

// stripeBalanceTxn is Stripe's balance_transaction object.
type stripeBalanceTxn struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Amount            int64             `json:"amount"`
	AvailableOn       int64             `json:"available_on"`
	BalanceType       string            `json:"balance_type"`
	Created           int64             `json:"created"`
	Currency          string            `json:"currency"`
	Description       *string           `json:"description"`
	ExchangeRate      *float64          `json:"exchange_rate"`
	Fee               int64             `json:"fee"`
	FeeDetails        []stripeFeeDetail `json:"fee_details"`
	Net               int64             `json:"net"`
	ReportingCategory string            `json:"reporting_category"`
	Source            string            `json:"source"`
	Status            string            `json:"status"`
	Type              string            `json:"type"`

	// account is the balance it moved: "" the platform's, or a connected
	// account's.
	account string
}

// stripeMove is one movement of a Stripe balance to post.
type stripeMove struct {
	id       string // "" for a new one
	account  string
	typ      string
	category string // reporting_category
	currency string
	source   string
	amount   int64 // signed: negative leaves the balance
	fee      int64 // Stripe's fee, taken from the amount
}

// postStripe records m as a balance transaction and moves the account's
// balance by its net. It returns the transaction's id.
func (st *state) postStripe(m stripeMove, now time.Time) string {
	if m.id == "" {
		m.id = newID("txn_", 24)
	}
	cur := strings.ToLower(m.currency)
	bt := &stripeBalanceTxn{ID: m.id, Object: "balance_transaction", Amount: m.amount, AvailableOn: now.Unix(),
		BalanceType: "payments", Created: now.Unix(), Currency: cur, Fee: m.fee, FeeDetails: []stripeFeeDetail{},
		Net: m.amount - m.fee, ReportingCategory: m.category, Source: m.source, Status: "available", Type: m.typ,
		account: m.account}
	if m.fee != 0 {
		bt.FeeDetails = append(bt.FeeDetails, stripeFeeDetail{Amount: m.fee, Currency: cur,
			Description: "Stripe processing fees", Type: "stripe_fee"})
	}
	st.stripeTxns = append(st.stripeTxns, bt)
	st.stripeTxnByID[bt.ID] = bt
	st.credit(ProviderStripe, m.account, cur, bt.Net)
	return bt.ID
}

// stripeBalanceTxnTypes are the types Stripe's list accepts as type.
func stripeBalanceTxnType(t string) bool {
	switch t {
	case "adjustment", "advance", "advance_funding", "anticipation_repayment", "application_fee",
		"application_fee_refund", "charge", "climate_order_purchase", "climate_order_refund",
		"connect_collection_transfer", "contribution", "issuing_authorization_hold",
		"issuing_authorization_release", "issuing_dispute", "issuing_transaction", "obligation_inbound",
		"obligation_outbound", "obligation_payout", "obligation_payout_failure", "obligation_reversal_inbound",
		"obligation_reversal_outbound", "payment", "payment_failure_refund", "payment_network_reserve_hold",
		"payment_network_reserve_release", "payment_refund", "payment_reversal", "payment_unreconciled",
		"payout", "payout_cancel", "payout_failure", "refund", "refund_failure", "reserve_transaction",
		"reserved_funds", "stripe_fee", "stripe_fx_fee", "tax_fee", "topup", "topup_reversal", "transfer",
		"transfer_cancel", "transfer_failure", "transfer_refund":
		return true
	}
	return false
}

// handleStripeBalanceTxn serves GET /v1/balance_transactions/{id}.
func (s *Server) handleStripeBalanceTxn(w http.ResponseWriter, r *http.Request) {
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
	if bt := s.st.stripeTxnByID[id]; bt != nil && bt.account == account {
		body = mustJSON(bt)
	}
	s.mu.Unlock()
	if body == nil {
		s.respond(w, call, resourceMissing("id", "balance transaction", id))
		return
	}
	s.respond(w, call, response{status: http.StatusOK, body: body, outcome: OutcomeOK, objectID: id})
}

// handleStripeBalanceTxns serves GET /v1/balance_transactions.
func (s *Server) handleStripeBalanceTxns(w http.ResponseWriter, r *http.Request) {
	_, call, account, ok := s.beginStripeRead(w, r)
	if !ok {
		return
	}
	s.respond(w, call, s.listStripeBalanceTxns(r, account))
}

func (s *Server) listStripeBalanceTxns(r *http.Request, account string) response {
	if bad := onlyQuery(r, "limit", "starting_after", "ending_before", "created", "created[gte]", "created[gt]",
		"created[lte]", "created[lt]", "type", "source", "payout", "currency"); bad != nil {
		return *bad
	}
	q := r.URL.Query()
	cursor, bad := parseStripeCursor(q)
	if bad != nil {
		return *bad
	}
	created, bad := createdFilter(q)
	if bad != nil {
		return *bad
	}
	typ, source, currency := q.Get("type"), q.Get("source"), strings.ToLower(q.Get("currency"))
	if typ != "" && !stripeBalanceTxnType(typ) {
		return stripeParamError("type", fmt.Sprintf("Invalid type: %s is not a balance transaction type.", typ))
	}
	if currency != "" && (len(currency) != 3 || strings.Trim(currency, "abcdefghijklmnopqrstuvwxyz") != "") {
		return stripeParamError("currency", fmt.Sprintf("Invalid currency: %s.", currency))
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if po := q.Get("payout"); po != "" {
		// Stripe filters on automatic payouts only; every payout here
		// was made through the API (manual).
		if !stripeVisible(s.st.byID[po], KindPayout, account) {
			return response{status: http.StatusBadRequest, outcome: OutcomeInvalid,
				body: stripeErr("invalid_request_error", "resource_missing", "payout", fmt.Sprintf("No such payout: '%s'", po))}
		}
		return stripeParamError("payout", "Balance transaction history can only be filtered on automatic payouts, not manual ones.")
	}
	all := s.st.stripeTxns
	var ordered []*stripeBalanceTxn // the account's, newest first
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].account == account {
			ordered = append(ordered, all[i])
		}
	}
	keep := func(bt *stripeBalanceTxn) bool {
		return created(bt.Created) && (typ == "" || bt.Type == typ) && (source == "" || bt.Source == source) &&
			(currency == "" || bt.Currency == currency)
	}
	page, hasMore, bad := stripePage(cursor, ordered, func(bt *stripeBalanceTxn) string { return bt.ID }, keep, "balance transaction")
	if bad != nil {
		return *bad
	}
	list := stripeList{Object: "list", Data: []any{}, URL: "/v1/balance_transactions", HasMore: hasMore}
	expandSource := expands(q, "data.source")
	for _, bt := range page {
		list.Data = append(list.Data, s.st.renderBalanceTxn(bt, expandSource))
	}
	return response{status: http.StatusOK, body: mustJSON(list), outcome: OutcomeOK}
}

// expands reports whether the request asks to expand field, in either of
// Stripe's spellings (expand[]=…, or expand[0]=… as stripe-go sends it).
func expands(q url.Values, field string) bool {
	for k, vs := range q {
		if (k == "expand[]" || strings.HasPrefix(k, "expand[")) && slices.Contains(vs, field) {
			return true
		}
	}
	return false
}

// renderBalanceTxn renders bt; with expandSource (expand[]=data.source) a
// charge's source is the charge object, as Stripe expands it (other
// sources stay ids: the stand-in expands only what Aegis asks for).
func (st *state) renderBalanceTxn(bt *stripeBalanceTxn, expandSource bool) json.RawMessage {
	raw := json.RawMessage(mustJSON(bt))
	p := st.charges[bt.Source]
	if !expandSource || p == nil {
		return raw
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	m["source"] = mustJSON(stripeChargeOf(p))
	return mustJSON(m)
}

// stripeCursor is a Stripe list request's paging: limit (1-100, default
// 10) and at most one of starting_after and ending_before.
type stripeCursor struct {
	limit         int
	after, before string
}

func parseStripeCursor(q url.Values) (stripeCursor, *response) {
	c := stripeCursor{limit: 10, after: q.Get("starting_after"), before: q.Get("ending_before")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			res := response{status: http.StatusBadRequest, outcome: OutcomeInvalid,
				body: (&paramError{code: "parameter_invalid_integer", param: "limit", msg: "Limit must be between 1 and 100."}).body()}
			return c, &res
		}
		c.limit = n
	}
	if c.after != "" && c.before != "" {
		res := stripeParamError("ending_before", "You may only specify one of these parameters: starting_after, ending_before.")
		return c, &res
	}
	return c, nil
}

// stripePage cuts one page out of ordered, the objects the caller sees,
// newest first: those keep admits, after the cursor's object
// (starting_after) or before it (ending_before). The cursor is looked for
// in all of ordered, not only among the kept; noun names the object in
// the error for a cursor naming none.
func stripePage[T any](c stripeCursor, ordered []T, id func(T) string, keep func(T) bool, noun string) ([]T, bool, *response) {
	var kept []T
	at := -1
	for _, o := range ordered {
		if oid := id(o); (c.after != "" && oid == c.after) || (c.before != "" && oid == c.before) {
			at = len(kept)
			kept = append(kept, o)
			continue
		}
		if keep(o) {
			kept = append(kept, o)
		}
	}
	if (c.after != "" || c.before != "") && at < 0 {
		param, oid := "starting_after", c.after
		if c.before != "" {
			param, oid = "ending_before", c.before
		}
		res := response{status: http.StatusBadRequest, outcome: OutcomeInvalid,
			body: stripeErr("invalid_request_error", "resource_missing", param, fmt.Sprintf("No such %s: '%s'", noun, oid))}
		return nil, false, &res
	}
	switch {
	case c.after != "":
		rest := kept[at+1:]
		return rest[:min(c.limit, len(rest))], len(rest) > c.limit, nil
	case c.before != "":
		newer := kept[:at]
		from := max(0, len(newer)-c.limit)
		return newer[from:], from > 0, nil
	default:
		return kept[:min(c.limit, len(kept))], len(kept) > c.limit, nil
	}
}
