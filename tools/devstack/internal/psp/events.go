package psp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The PSPs' own record, as their APIs list it: what the PSP reconciliation
// reads to recover an event whose webhook never arrived.
//
// Stripe: GET /v1/events lists every event created (sent, failed or
// dropped), newest first, with limit (1-100, default 10), starting_after /
// ending_before (event ids), created / created[gte|gt|lte|lt], type and
// types[]; GET /v1/events/{id} reads one. Payouts and transfers are listed
// by GET /v1/payouts and /v1/transfers (stripe.go).
//
// Paystack has no events API: GET /transaction and GET /transfer list the
// objects themselves, newest first, with perPage (default 50, at most 100),
// page (from 1), from / to (ISO 8601 times or dates, on the creation time)
// and status, answering meta {total, skipped, perPage, page, pageCount};
// GET /transaction/verify/{reference} reads one transaction.

// recordedEvent is one Stripe event in the PSP's record.
type recordedEvent struct {
	id      string
	typ     string
	created int64
	// account is the connected account the event happened on ("" for the
	// platform's own): listed only with that Stripe-Account.
	account string
	body    []byte
}

// recordStripeEventLocked renders a Stripe event about obj as it is now and
// keeps it in the PSP's record; it returns the event id and body. An event
// on a connected account carries it as "account", as Connect events do.
func (s *Server) recordStripeEventLocked(st *state, typ, account string, obj any, now time.Time) (string, []byte) {
	id := newID("evt_", 24)
	body := mustJSON(stripeEvent{ID: id, Object: "event", Account: account, APIVersion: StripeAPIVersion, Created: now.Unix(),
		Data: stripeEventData{Object: obj}, PendingWebhooks: 1, Type: typ})
	st.stripeEvents = append(st.stripeEvents, recordedEvent{id: id, typ: typ, created: now.Unix(), account: account, body: body})
	return id, body
}

func stripeParamError(param, msg string) response {
	return response{status: http.StatusBadRequest, outcome: OutcomeInvalid,
		body: stripeErr("invalid_request_error", "parameter_invalid", param, msg)}
}

// createdFilter reads created / created[gte|gt|lte|lt] from q.
func createdFilter(q url.Values) (func(int64) bool, *response) {
	type bound struct {
		key string
		ok  func(v, n int64) bool
	}
	bounds := []bound{
		{"created", func(v, n int64) bool { return v == n }},
		{"created[gte]", func(v, n int64) bool { return v >= n }},
		{"created[gt]", func(v, n int64) bool { return v > n }},
		{"created[lte]", func(v, n int64) bool { return v <= n }},
		{"created[lt]", func(v, n int64) bool { return v < n }},
	}
	var checks []func(int64) bool
	for _, b := range bounds {
		raw := q.Get(b.key)
		if raw == "" {
			continue
		}
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			res := stripeParamError(b.key, "Invalid integer: "+raw)
			return nil, &res
		}
		checks = append(checks, func(v int64) bool { return b.ok(v, n) })
	}
	return func(v int64) bool {
		for _, c := range checks {
			if !c(v) {
				return false
			}
		}
		return true
	}, nil
}

// handleStripeEvents serves GET /v1/events as Stripe does.
// Each account sees its own events: the platform (no Stripe-Account) its
// own, a connected account's only with its Stripe-Account.
func (s *Server) handleStripeEvents(w http.ResponseWriter, r *http.Request) {
	_, call, account, ok := s.beginStripeRead(w, r)
	if !ok {
		return
	}
	s.respond(w, call, s.listStripeEvents(r.URL.Query(), account))
}

func (s *Server) listStripeEvents(q url.Values, account string) response {
	cursor, bad := parseStripeCursor(q)
	if bad != nil {
		return *bad
	}
	created, bad := createdFilter(q)
	if bad != nil {
		return *bad
	}
	types := map[string]bool{}
	for k, vs := range q {
		if k == "type" || k == "types[]" || (strings.HasPrefix(k, "types[") && strings.HasSuffix(k, "]")) {
			for _, v := range vs {
				types[v] = true
			}
		}
	}
	match := func(e recordedEvent) bool {
		if !created(e.created) {
			return false
		}
		if len(types) == 0 {
			return true
		}
		if types[e.typ] {
			return true
		}
		for t := range types { // Stripe's wildcard: "charge.dispute.*"
			if strings.HasSuffix(t, ".*") && strings.HasPrefix(e.typ, strings.TrimSuffix(t, "*")) {
				return true
			}
		}
		return false
	}

	s.mu.Lock()
	all := s.st.stripeEvents
	// the account's, newest first, as Stripe lists.
	var ordered []recordedEvent
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].account == account {
			ordered = append(ordered, all[i])
		}
	}
	s.mu.Unlock()

	page, hasMore, bad := stripePage(cursor, ordered, func(e recordedEvent) string { return e.id }, match, "event")
	if bad != nil {
		return *bad
	}
	list := stripeList{Object: "list", Data: []any{}, URL: "/v1/events", HasMore: hasMore}
	for _, e := range page {
		list.Data = append(list.Data, json.RawMessage(e.body))
	}
	return response{status: http.StatusOK, body: mustJSON(list), outcome: OutcomeOK}
}

// handleStripeEvent serves GET /v1/events/{id}.
func (s *Server) handleStripeEvent(w http.ResponseWriter, r *http.Request) {
	_, call, account, ok := s.beginStripeRead(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	var body []byte
	s.mu.Lock()
	for _, e := range s.st.stripeEvents {
		if e.id == id && e.account == account {
			body = e.body
			break
		}
	}
	s.mu.Unlock()
	if body == nil {
		s.respond(w, call, response{status: http.StatusNotFound, outcome: OutcomeNotFound,
			body: stripeErr("invalid_request_error", "resource_missing", "id", fmt.Sprintf("No such event: '%s'", id))})
		return
	}
	s.respond(w, call, response{status: http.StatusOK, body: body, outcome: OutcomeOK, objectID: id})
}

// paystackMeta is the pagination block of Paystack's list answers.
type paystackMeta struct {
	Total     int `json:"total"`
	Skipped   int `json:"skipped"`
	PerPage   int `json:"perPage"`
	Page      int `json:"page"`
	PageCount int `json:"pageCount"`
}

type paystackListEnvelope struct {
	Status  bool         `json:"status"`
	Message string       `json:"message"`
	Data    []any        `json:"data"`
	Meta    paystackMeta `json:"meta"`
}

// paystackListQuery is a Paystack list request's paging and filters.
type paystackListQuery struct {
	perPage, page int
	from, to      time.Time
	status        string
}

func parsePaystackTime(v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("invalid date %q", v)
}

func parsePaystackList(q url.Values) (paystackListQuery, error) {
	l := paystackListQuery{perPage: 50, page: 1, status: q.Get("status")}
	if v := q.Get("perPage"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return l, fmt.Errorf("perPage must be between 1 and 100")
		}
		l.perPage = n
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return l, fmt.Errorf("page must be a positive integer")
		}
		l.page = n
	}
	var err error
	if v := q.Get("from"); v != "" {
		if l.from, err = parsePaystackTime(v); err != nil {
			return l, fmt.Errorf("from: %w", err)
		}
	}
	if v := q.Get("to"); v != "" {
		if l.to, err = parsePaystackTime(v); err != nil {
			return l, fmt.Errorf("to: %w", err)
		}
	}
	return l, nil
}

func (l paystackListQuery) keep(created time.Time, status string) bool {
	return (l.from.IsZero() || !created.Before(l.from)) && (l.to.IsZero() || !created.After(l.to)) &&
		(l.status == "" || l.status == status)
}

// page cuts one page of items (already filtered, newest first).
func (l paystackListQuery) pageOf(msg string, items []any) []byte {
	total := len(items)
	skipped := min(total, (l.page-1)*l.perPage)
	end := min(total, skipped+l.perPage)
	env := paystackListEnvelope{Status: true, Message: msg, Data: append([]any{}, items[skipped:end]...),
		Meta: paystackMeta{Total: total, Skipped: skipped, PerPage: l.perPage, Page: l.page,
			PageCount: (total + l.perPage - 1) / l.perPage}}
	return mustJSON(env)
}

// paystackList runs a Paystack list request: items returns the filtered
// items, newest first, under s.mu.
func (s *Server) paystackList(w http.ResponseWriter, r *http.Request, msg string, items func(st *state, key string, l paystackListQuery) []any) {
	st, call := s.beginCall(r, ProviderPaystack)
	key, errBody := paystackAPIKey(r)
	if errBody != nil {
		s.respond(w, call, response{status: http.StatusUnauthorized, body: errBody, outcome: OutcomeUnauthorized})
		return
	}
	s.sleep(r.Context(), s.latency(ProviderPaystack))
	l, err := parsePaystackList(r.URL.Query())
	if err != nil {
		s.respond(w, call, response{status: http.StatusBadRequest, body: paystackErr(err.Error(), "invalid_params"), outcome: OutcomeInvalid})
		return
	}
	s.mu.Lock()
	list := items(st, key, l)
	body := l.pageOf(msg, list)
	s.mu.Unlock()
	s.respond(w, call, response{status: http.StatusOK, body: body, outcome: OutcomeOK})
}

// handlePaystackTransferList serves GET /transfer.
func (s *Server) handlePaystackTransferList(w http.ResponseWriter, r *http.Request) {
	s.paystackList(w, r, "Transfers retrieved", func(st *state, key string, l paystackListQuery) []any {
		var out []any
		for i := len(st.objects) - 1; i >= 0; i-- {
			o := st.objects[i]
			if o.paystack == nil || o.paystack.Integration != integrationID(key) {
				continue
			}
			if l.keep(o.rec.CreatedAt, o.paystack.Status) {
				out = append(out, json.RawMessage(mustJSON(o.paystack)))
			}
		}
		return out
	})
}

// handlePaystackTransactionList serves GET /transaction (the payments the
// stand-in was told of; not scoped per secret key).
func (s *Server) handlePaystackTransactionList(w http.ResponseWriter, r *http.Request) {
	s.paystackList(w, r, "Transactions retrieved", func(st *state, _ string, l paystackListQuery) []any {
		var out []any
		for i := len(st.paymentOrder) - 1; i >= 0; i-- {
			p := st.paymentOrder[i]
			if p.paystackTxn == nil {
				continue
			}
			if l.keep(p.created, "success") {
				out = append(out, json.RawMessage(mustJSON(p.paystackTxn)))
			}
		}
		return out
	})
}

// handlePaystackTransactionVerify serves GET /transaction/verify/{reference}.
func (s *Server) handlePaystackTransactionVerify(w http.ResponseWriter, r *http.Request) {
	_, call := s.beginCall(r, ProviderPaystack)
	if _, errBody := paystackAPIKey(r); errBody != nil {
		s.respond(w, call, response{status: http.StatusUnauthorized, body: errBody, outcome: OutcomeUnauthorized})
		return
	}
	s.mu.Lock()
	var body []byte
	if p := s.st.payments[r.PathValue("reference")]; p != nil && p.paystackTxn != nil {
		body = paystackOK("Verification successful", p.paystackTxn)
	}
	s.mu.Unlock()
	if body == nil {
		s.respond(w, call, response{status: http.StatusNotFound, body: paystackErr("Transaction reference not found", ""), outcome: OutcomeNotFound})
		return
	}
	s.respond(w, call, response{status: http.StatusOK, body: body, outcome: OutcomeOK})
}
