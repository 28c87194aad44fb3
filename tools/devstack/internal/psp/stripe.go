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

// StripeAPIVersion is the api_version stamped on events; it is the version
// stripe-go v76 pins, so webhook.ConstructEvent accepts our events.
const StripeAPIVersion = "2023-10-16"

// stripePayout is Stripe's payout object (the fields Aegis can rely on).
type stripePayout struct {
	ID                        string            `json:"id"`
	Object                    string            `json:"object"`
	Amount                    int64             `json:"amount"`
	ApplicationFee            *string           `json:"application_fee"`
	ApplicationFeeAmount      *int64            `json:"application_fee_amount"`
	ArrivalDate               int64             `json:"arrival_date"`
	Automatic                 bool              `json:"automatic"`
	BalanceTransaction        string            `json:"balance_transaction"`
	Created                   int64             `json:"created"`
	Currency                  string            `json:"currency"`
	Description               *string           `json:"description"`
	Destination               *string           `json:"destination"`
	FailureBalanceTransaction *string           `json:"failure_balance_transaction"`
	FailureCode               *string           `json:"failure_code"`
	FailureMessage            *string           `json:"failure_message"`
	Livemode                  bool              `json:"livemode"`
	Metadata                  map[string]string `json:"metadata"`
	Method                    string            `json:"method"`
	OriginalPayout            *string           `json:"original_payout"`
	PayoutMethod              *string           `json:"payout_method"`
	ReconciliationStatus      string            `json:"reconciliation_status"`
	ReversedBy                *string           `json:"reversed_by"`
	SourceType                string            `json:"source_type"`
	StatementDescriptor       *string           `json:"statement_descriptor"`
	Status                    string            `json:"status"`
	TraceID                   stripeTraceID     `json:"trace_id"`
	Type                      string            `json:"type"`
}

// stripeTraceID is a payout's trace id as Stripe shows it (the stand-in's
// banks give none).
type stripeTraceID struct {
	Status string  `json:"status"`
	Value  *string `json:"value"`
}

// stripeTransfer is Stripe's transfer object.
type stripeTransfer struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountReversed     int64             `json:"amount_reversed"`
	BalanceTransaction string            `json:"balance_transaction"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Description        *string           `json:"description"`
	Destination        string            `json:"destination"`
	DestinationPayment string            `json:"destination_payment"`
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	Reversals          stripeList        `json:"reversals"`
	Reversed           bool              `json:"reversed"`
	SourceTransaction  *string           `json:"source_transaction"`
	SourceType         string            `json:"source_type"`
	TransferGroup      *string           `json:"transfer_group"`

	// reversals are all of the transfer's reversals, newest first; the
	// Reversals list shows the ten newest, as Stripe does.
	reversals []*stripeReversal
}

type stripeList struct {
	Object     string `json:"object"`
	Data       []any  `json:"data"`
	HasMore    bool   `json:"has_more"`
	TotalCount int    `json:"total_count"`
	URL        string `json:"url"`
}

// Stripe error envelope.
type stripeErrorBody struct {
	Error stripeErrorDetail `json:"error"`
}

type stripeErrorDetail struct {
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Param   string `json:"param,omitempty"`
	Message string `json:"message"`
}

func stripeErr(typ, code, param, msg string) []byte {
	return mustJSON(stripeErrorBody{Error: stripeErrorDetail{Type: typ, Code: code, Param: param, Message: msg}})
}

type stripeDialect struct{}

func (stripeDialect) serverError(int) []byte {
	return stripeErr("api_error", "", "", "An unknown error occurred while processing your request. (injected by the PSP stand-in)")
}

func (stripeDialect) rateLimited() []byte {
	return stripeErr("rate_limit_error", "rate_limit", "", "Too many requests hit the API too quickly. We recommend an exponential backoff of your requests. (injected by the PSP stand-in)")
}

func (stripeDialect) timedOut() []byte {
	return stripeErr("api_error", "", "", "The request timed out. (injected by the PSP stand-in)")
}

func (stripeDialect) idempotencyMismatch(key string) []byte {
	return stripeErr("idempotency_error", "", "", fmt.Sprintf(
		"Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '%s' if you meant to execute a different request.", key))
}

func (stripeDialect) idempotencyInUse(key string) []byte {
	return stripeErr("idempotency_error", "idempotency_key_in_use", "", fmt.Sprintf(
		"There is currently another in-progress request using this Stripe API key (or connected account) and idempotency key: %s. Please try again later.", key))
}

// stripeAPIKey returns the API key, or the 401 body.
func stripeAPIKey(r *http.Request) (string, []byte) {
	auth := r.Header.Get("Authorization")
	scheme, key, ok := strings.Cut(auth, " ")
	key = strings.TrimSpace(key)
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
		return "", stripeErr("invalid_request_error", "", "",
			"You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').")
	}
	if LiveKey(key) {
		return "", stripeErr("invalid_request_error", "", "", "This is the Aegis PSP stand-in: it refuses live API keys ("+maskKey(key)+"); use a test key.")
	}
	if (!strings.HasPrefix(key, "sk_") && !strings.HasPrefix(key, "rk_")) || len(key) < 4 {
		return "", stripeErr("invalid_request_error", "", "", "Invalid API Key provided: "+maskKey(key))
	}
	return key, nil
}

func maskKey(k string) string {
	if len(k) <= 8 {
		return strings.Repeat("*", len(k))
	}
	return k[:3] + strings.Repeat("*", len(k)-7) + k[len(k)-4:]
}

// paramError is a Stripe validation error.
type paramError struct {
	code, param, msg string
}

func (e *paramError) body() []byte {
	return stripeErr("invalid_request_error", e.code, e.param, e.msg)
}

func missing(param string) *paramError {
	return &paramError{code: "parameter_missing", param: param, msg: fmt.Sprintf("Missing required param: %s.", param)}
}

// stripeCommon are the parameters payouts and transfers share.
type stripeCommon struct {
	amount      int64
	currency    string
	description *string
	destination string
	metadata    map[string]string
}

func optional(form url.Values, key string) *string {
	if _, ok := form[key]; !ok {
		return nil
	}
	v := form.Get(key)
	if v == "" {
		return nil
	}
	return &v
}

// unknownParam refuses a form key that is not allowed (metadata and expand
// always are), as Stripe refuses unknown parameters.
func unknownParam(form url.Values, allowed ...string) *paramError {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch {
		case slices.Contains(allowed, k), k == "metadata",
			strings.HasPrefix(k, "metadata[") && strings.HasSuffix(k, "]"),
			k == "expand[]", strings.HasPrefix(k, "expand["):
		default:
			return &paramError{code: "parameter_unknown", param: k, msg: fmt.Sprintf("Received unknown parameter: %s", k)}
		}
	}
	return nil
}

// positiveAmount reads an amount parameter.
func positiveAmount(raw string) (int64, *paramError) {
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return 0, &paramError{code: "parameter_invalid_integer", param: "amount", msg: fmt.Sprintf("Invalid integer: %s", raw)}
	}
	if n <= 0 {
		return 0, &paramError{code: "parameter_invalid_integer", param: "amount", msg: "This value must be greater than or equal to 1."}
	}
	return n, nil
}

// metadataOf reads metadata[...] (empty values unset a key, as in Stripe).
func metadataOf(form url.Values) map[string]string {
	md := map[string]string{}
	for k := range form {
		if strings.HasPrefix(k, "metadata[") && strings.HasSuffix(k, "]") {
			name := k[len("metadata[") : len(k)-1]
			if v := form.Get(k); v != "" && name != "" {
				md[name] = v
			}
		}
	}
	return md
}

func parseStripeCommon(form url.Values, allowed ...string) (stripeCommon, *paramError) {
	var c stripeCommon
	if perr := unknownParam(form, allowed...); perr != nil {
		return c, perr
	}
	raw := form.Get("amount")
	if raw == "" {
		return c, missing("amount")
	}
	n, perr := positiveAmount(raw)
	if perr != nil {
		return c, perr
	}
	c.amount = n

	cur := strings.ToLower(form.Get("currency"))
	if cur == "" {
		return c, missing("currency")
	}
	if len(cur) != 3 || strings.Trim(cur, "abcdefghijklmnopqrstuvwxyz") != "" {
		return c, &paramError{code: "parameter_invalid_string", param: "currency", msg: fmt.Sprintf("Invalid currency: %s.", cur)}
	}
	c.currency = cur
	c.description = optional(form, "description")
	c.destination = form.Get("destination")
	c.metadata = metadataOf(form)
	return c, nil
}

func invalidDestination(dest string) bool {
	return strings.HasPrefix(dest, "ba_invalid") || strings.HasPrefix(dest, "acct_invalid") ||
		strings.HasPrefix(dest, "ba_lost_invalid")
}

// loseFirstAnswer reports whether this payout create is the first for its
// payout id to a ba_lost_* destination: it executes (creates the payout,
// or for ba_lost_invalid* is refused) and its answer is lost, an unknown
// outcome for the caller. Later creates for the payout answer normally.
func loseFirstAnswer(st *state, c stripeCommon) bool {
	pid := c.metadata["payout_id"]
	if !strings.HasPrefix(c.destination, "ba_lost_") || pid == "" || st.lostOnce[pid] {
		return false
	}
	st.lostOnce[pid] = true
	return true
}

var (
	stripeAccountInvalid = stripeErr("invalid_request_error", "account_invalid", "destination",
		"The destination account is invalid or has been closed; payouts and transfers to it are not possible.")
	stripeBalanceInsufficient = stripeErr("invalid_request_error", "balance_insufficient", "",
		"You have insufficient funds in your Stripe account for this transfer. Your card balance is too low. You can use the /v1/balance endpoint to view your Stripe balance (for more details, see stripe.com/docs/api#balance).")
)

// stripeCreate is a Stripe create past its preamble.
type stripeCreate struct {
	st   *state
	call *CallRecord
	key  string
	// account is the connected account the request acts for
	// (Stripe-Account), "" for the platform.
	account string
	form    url.Values
}

// beginStripeCreate does the common preamble of a Stripe create: call
// record, auth, Stripe-Account, form parsing. ok is false if a response
// was written.
func (s *Server) beginStripeCreate(w http.ResponseWriter, r *http.Request) (stripeCreate, bool) {
	st, call := s.beginCall(r, ProviderStripe)
	key, errBody := stripeAPIKey(r)
	if errBody != nil {
		s.respond(w, call, response{status: http.StatusUnauthorized, body: errBody, outcome: OutcomeUnauthorized})
		return stripeCreate{}, false
	}
	account, bad := stripeAccountOf(r, key)
	if bad != nil {
		s.respond(w, call, *bad)
		return stripeCreate{}, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	if err := r.ParseForm(); err != nil {
		s.respond(w, call, response{status: http.StatusBadRequest, body: stripeErr("invalid_request_error", "", "", "Invalid request body: "+err.Error()), outcome: OutcomeInvalid})
		return stripeCreate{}, false
	}
	if len(strings.TrimSpace(r.Header.Get("Idempotency-Key"))) > 255 {
		s.respond(w, call, response{status: http.StatusBadRequest, body: stripeErr("invalid_request_error", "", "", "Idempotency-Key must be at most 255 characters long."), outcome: OutcomeInvalid})
		return stripeCreate{}, false
	}
	s.setCallPayoutID(call, r.PostForm.Get("metadata[payout_id]"))
	return stripeCreate{st: st, call: call, key: key, account: account, form: r.PostForm}, true
}

// createOp is the pipeline's op for c: its idempotency key is scoped per
// API key and Stripe-Account, as Stripe scopes keys.
func (c stripeCreate) createOp(r *http.Request) createOp {
	idem := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	return createOp{
		provider:    ProviderStripe,
		d:           stripeDialect{},
		st:          c.st,
		call:        c.call,
		idemKey:     idem,
		idemScope:   strings.Join([]string{string(ProviderStripe), c.key, c.account, idem}, "\x00"),
		fingerprint: r.Method + " " + r.URL.Path + "?" + c.form.Encode(),
	}
}

func (s *Server) handleStripePayoutCreate(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.beginStripeCreate(w, r)
	if !ok {
		return
	}
	op := sc.createOp(r)
	form := sc.form
	op.exec = func(st *state, draw func() FaultKind) response {
		c, perr := parseStripeCommon(form, "amount", "currency", "description", "destination", "method", "source_type", "statement_descriptor")
		if perr != nil {
			return response{status: http.StatusBadRequest, body: perr.body(), outcome: OutcomeInvalid}
		}
		method := form.Get("method")
		switch method {
		case "":
			method = "standard"
		case "standard", "instant":
		default:
			return response{status: http.StatusBadRequest, body: (&paramError{code: "parameter_invalid_string", param: "method", msg: "Invalid method: must be one of standard, instant"}).body(), outcome: OutcomeInvalid}
		}
		sourceType := form.Get("source_type")
		switch sourceType {
		case "":
			sourceType = "card"
		case "bank_account", "card", "fpx":
		default:
			return response{status: http.StatusBadRequest, body: (&paramError{code: "parameter_invalid_string", param: "source_type", msg: "Invalid source_type: must be one of bank_account, card, fpx"}).body(), outcome: OutcomeInvalid}
		}
		sd := optional(form, "statement_descriptor")
		if sd != nil && len(*sd) > 22 {
			return response{status: http.StatusBadRequest, body: (&paramError{code: "string_length_invalid", param: "statement_descriptor", msg: "Statement descriptor must be at most 22 characters."}).body(), outcome: OutcomeInvalid}
		}

		lose := loseFirstAnswer(st, c)
		switch f := draw(); {
		case f == FaultInvalidAccount || invalidDestination(c.destination):
			return response{status: http.StatusBadRequest, body: stripeAccountInvalid, outcome: OutcomeRejected, lose: lose}
		case f == FaultInsufficientFunds:
			return response{status: http.StatusBadRequest, body: stripeBalanceInsufficient, outcome: OutcomeRejected, lose: lose}
		}
		if sc.account != "" {
			if res, refused := connectedPayoutRefused(st, sc.account, c); refused {
				res.lose = lose
				return res
			}
		}

		now := time.Now()
		p := &stripePayout{
			ID:                   newID("po_", 24),
			Object:               "payout",
			Amount:               c.amount,
			ArrivalDate:          now.Add(48 * time.Hour).Unix(),
			BalanceTransaction:   newID("txn_", 24),
			Created:              now.Unix(),
			Currency:             c.currency,
			Description:          c.description,
			Metadata:             c.metadata,
			Method:               method,
			ReconciliationStatus: "not_applicable",
			SourceType:           sourceType,
			StatementDescriptor:  sd,
			Status:               "pending",
			TraceID:              stripeTraceID{Status: "pending"},
			Type:                 "bank_account",
		}
		if c.destination != "" {
			d := c.destination
			p.Destination = &d
			if strings.HasPrefix(d, "card_") {
				p.Type = "card"
			}
		}
		o := &object{
			rec: ObjectRecord{
				Provider:       ProviderStripe,
				Kind:           KindPayout,
				ID:             p.ID,
				IdempotencyKey: op.idemKey,
				PayoutID:       c.metadata["payout_id"],
				Amount:         p.Amount,
				Currency:       p.Currency,
				Destination:    c.destination,
				Status:         p.Status,
				CreatedAt:      now.UTC(),
				Account:        sc.account,
			},
			stripePayout: p,
		}
		if sc.account != "" {
			// The money leaves the connected account's balance now.
			st.postStripe(stripeMove{id: p.BalanceTransaction, account: sc.account, typ: "payout", category: "payout",
				currency: c.currency, source: p.ID, amount: -c.amount}, now)
		}
		s.addObjectLocked(st, o, now)
		return response{status: http.StatusOK, body: mustJSON(p), outcome: OutcomeCreated, objectID: p.ID, lose: lose}
	}
	s.runCreate(w, r, op)
}

// connectedPayoutRefused checks a payout on a connected account: payouts
// enabled, the destination one of its external accounts, and the balance
// enough.
func connectedPayoutRefused(st *state, account string, c stripeCommon) (response, bool) {
	switch {
	case !accountPayoutsEnabled(account):
		return response{status: http.StatusBadRequest, outcome: OutcomeRejected, body: stripeErr("invalid_request_error", "payouts_not_allowed", "",
			"Payouts have been disabled on this account. Check the account's requirements to see what is needed to enable them.")}, true
	case c.destination != "" && externalAccountMissing(c.destination):
		return response{status: http.StatusBadRequest, outcome: OutcomeRejected, body: stripeErr("invalid_request_error", "resource_missing", "destination",
			fmt.Sprintf("No such external account: '%s'", c.destination))}, true
	case st.balance(ProviderStripe, account, c.currency) < c.amount:
		return response{status: http.StatusBadRequest, body: stripeBalanceInsufficient, outcome: OutcomeRejected}, true
	}
	return response{}, false
}

func (s *Server) handleStripeTransferCreate(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.beginStripeCreate(w, r)
	if !ok {
		return
	}
	op := sc.createOp(r)
	form := sc.form
	op.exec = func(st *state, draw func() FaultKind) response {
		c, perr := parseStripeCommon(form, "amount", "currency", "description", "destination", "source_transaction", "source_type", "transfer_group")
		if perr == nil && c.destination == "" {
			perr = missing("destination")
		}
		if perr != nil {
			return response{status: http.StatusBadRequest, body: perr.body(), outcome: OutcomeInvalid}
		}
		sourceType := form.Get("source_type")
		switch sourceType {
		case "":
			sourceType = "card"
		case "bank_account", "card", "fpx":
		default:
			return response{status: http.StatusBadRequest, body: (&paramError{code: "parameter_invalid_string", param: "source_type", msg: "Invalid source_type: must be one of bank_account, card, fpx"}).body(), outcome: OutcomeInvalid}
		}

		switch f := draw(); {
		case f == FaultInvalidAccount || invalidDestination(c.destination):
			return response{status: http.StatusBadRequest, body: stripeAccountInvalid, outcome: OutcomeRejected}
		case f == FaultInsufficientFunds:
			return response{status: http.StatusBadRequest, body: stripeBalanceInsufficient, outcome: OutcomeRejected}
		case strings.HasPrefix(c.destination, "acct_missing"):
			return response{status: http.StatusBadRequest, outcome: OutcomeRejected, body: stripeErr("invalid_request_error", "resource_missing", "destination",
				fmt.Sprintf("No such destination: '%s'", c.destination))}
		case !accountTransfersActive(c.destination):
			return response{status: http.StatusBadRequest, outcome: OutcomeRejected, body: stripeErr("invalid_request_error", "insufficient_capabilities_for_transfer", "destination",
				"Your destination account needs to have at least one of the following capabilities enabled: transfers, crypto_transfers, legacy_payments")}
		case st.balance(ProviderStripe, sc.account, c.currency) < c.amount:
			return response{status: http.StatusBadRequest, body: stripeBalanceInsufficient, outcome: OutcomeRejected}
		}

		now := time.Now()
		if strings.HasPrefix(c.destination, "acct_") {
			st.accountCreatedLocked(c.destination, now)
		}
		id := newID("tr_", 24)
		t := &stripeTransfer{
			ID:                 id,
			Object:             "transfer",
			Amount:             c.amount,
			BalanceTransaction: newID("txn_", 24),
			Created:            now.Unix(),
			Currency:           c.currency,
			Description:        c.description,
			Destination:        c.destination,
			DestinationPayment: newID("py_", 24),
			Metadata:           c.metadata,
			SourceTransaction:  optional(form, "source_transaction"),
			SourceType:         sourceType,
			TransferGroup:      optional(form, "transfer_group"),
		}
		t.renderReversals()
		// The transfer has moved the money: it is in the destination's
		// balance from now on.
		st.postStripe(stripeMove{id: t.BalanceTransaction, account: sc.account, typ: "transfer", category: "transfer",
			currency: t.Currency, source: t.ID, amount: -t.Amount}, now)
		st.postStripe(stripeMove{account: t.Destination, typ: "payment", category: "charge",
			currency: t.Currency, source: t.DestinationPayment, amount: t.Amount}, now)
		o := &object{
			rec: ObjectRecord{
				Provider:       ProviderStripe,
				Kind:           KindTransfer,
				ID:             id,
				IdempotencyKey: op.idemKey,
				PayoutID:       c.metadata["payout_id"],
				Amount:         t.Amount,
				Currency:       t.Currency,
				Destination:    t.Destination,
				Status:         "pending",
				CreatedAt:      now.UTC(),
				Account:        sc.account,
			},
			stripeTransfer: t,
		}
		s.addObjectLocked(st, o, now)
		s.enqueueEventLocked(st, o, "transfer.created", now)
		return response{status: http.StatusOK, body: mustJSON(t), outcome: OutcomeCreated, objectID: id}
	}
	s.runCreate(w, r, op)
}

// addObjectLocked stores o and schedules its auto-settlement: after the
// settle delay, or after the faults' pending_for, and for a Paystack
// transfer made under otp_for after that wait in status "otp" plus the
// settle delay. A Paystack transfer made under otp_for is in "otp" even
// without auto-settlement (then it stays there until settled by hand).
func (s *Server) addObjectLocked(st *state, o *object, now time.Time) {
	spec := s.faults[o.rec.Provider].spec
	otp := o.paystack != nil && spec.OTPFor > 0
	if otp {
		o.paystack.Status, o.rec.Status = "otp", "otp"
	}
	st.addObject(o)
	if s.cfg.SettleDelay <= 0 {
		return
	}
	delay := s.cfg.SettleDelay
	if spec.PendingFor > 0 {
		delay = time.Duration(spec.PendingFor)
	}
	if otp {
		delay += time.Duration(spec.OTPFor)
	}
	st.schedule(&task{due: now.Add(delay), settleID: o.rec.ID})
	s.nudge()
}

func (s *Server) handleStripeGet(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, call, account, ok := s.beginStripeRead(w, r)
		if !ok {
			return
		}
		id := r.PathValue("id")
		s.mu.Lock()
		o := s.st.byID[id]
		var body []byte
		var payoutID string
		if stripeVisible(o, kind, account) {
			payoutID = o.rec.PayoutID
			if o.stripePayout != nil {
				body = mustJSON(o.stripePayout)
			} else {
				body = mustJSON(o.stripeTransfer)
			}
		}
		call.PayoutID = payoutID
		s.mu.Unlock()
		if body == nil {
			s.respond(w, call, response{
				status:  http.StatusNotFound,
				body:    stripeErr("invalid_request_error", "resource_missing", "id", fmt.Sprintf("No such %s: '%s'", kind, id)),
				outcome: OutcomeNotFound,
			})
			return
		}
		s.respond(w, call, response{status: http.StatusOK, body: body, outcome: OutcomeOK, objectID: id})
	}
}

// handleStripeList serves GET /v1/payouts and GET /v1/transfers as Stripe
// does, newest first: limit (1-100, default 10), starting_after,
// created[gte|gt|lte|lt] or created, destination and (transfers)
// transfer_group. Stripe cannot filter by metadata; neither can this.
func (s *Server) handleStripeList(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, call, account, ok := s.beginStripeRead(w, r)
		if !ok {
			return
		}
		q := r.URL.Query()
		limit := 10
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 100 {
				s.respond(w, call, response{status: http.StatusBadRequest, outcome: OutcomeInvalid,
					body: (&paramError{code: "parameter_invalid_integer", param: "limit", msg: "Limit must be between 1 and 100."}).body()})
				return
			}
			limit = n
		}
		bound := func(key string) (int64, bool) {
			v := q.Get(key)
			n, err := strconv.ParseInt(v, 10, 64)
			return n, v != "" && err == nil
		}
		keep := func(o *object) bool {
			var created int64
			var dest, group string
			if o.stripePayout != nil {
				created = o.stripePayout.Created
				if o.stripePayout.Destination != nil {
					dest = *o.stripePayout.Destination
				}
			} else {
				created, dest = o.stripeTransfer.Created, o.stripeTransfer.Destination
				if o.stripeTransfer.TransferGroup != nil {
					group = *o.stripeTransfer.TransferGroup
				}
			}
			if n, ok := bound("created"); ok && created != n {
				return false
			}
			if n, ok := bound("created[gte]"); ok && created < n {
				return false
			}
			if n, ok := bound("created[gt]"); ok && created <= n {
				return false
			}
			if n, ok := bound("created[lte]"); ok && created > n {
				return false
			}
			if n, ok := bound("created[lt]"); ok && created >= n {
				return false
			}
			if v := q.Get("destination"); v != "" && v != dest {
				return false
			}
			if v := q.Get("transfer_group"); v != "" && v != group {
				return false
			}
			return true
		}
		after := q.Get("starting_after")
		list := stripeList{Object: "list", Data: []any{}, URL: "/v1/" + kind + "s"}
		s.mu.Lock()
		objs := s.st.objects
		skipping := after != ""
		for i := len(objs) - 1; i >= 0; i-- {
			o := objs[i]
			if !stripeVisible(o, kind, account) {
				continue
			}
			if skipping {
				skipping = o.rec.ID != after
				continue
			}
			if !keep(o) {
				continue
			}
			if len(list.Data) == limit {
				list.HasMore = true
				break
			}
			if o.stripePayout != nil {
				list.Data = append(list.Data, json.RawMessage(mustJSON(o.stripePayout)))
			} else {
				list.Data = append(list.Data, json.RawMessage(mustJSON(o.stripeTransfer)))
			}
		}
		s.mu.Unlock()
		s.respond(w, call, response{status: http.StatusOK, body: mustJSON(list), outcome: OutcomeOK})
	}
}

// stripeVisible reports whether o is a Stripe object of kind that a
// request acting for account ("" the platform) sees: objects made under a
// connected account are visible only with its Stripe-Account header.
func stripeVisible(o *object, kind, account string) bool {
	return o != nil && o.rec.Provider == ProviderStripe && o.rec.Kind == kind && o.rec.Account == account
}

func (s *Server) handleStripeUnknown(w http.ResponseWriter, r *http.Request) {
	_, call := s.beginCall(r, ProviderStripe)
	s.respond(w, call, response{
		status: http.StatusNotFound,
		body: stripeErr("invalid_request_error", "", "", fmt.Sprintf(
			"Unrecognized request URL (%s: %s). The PSP stand-in implements POST and GET /v1/payouts, GET /v1/payouts/{id}, POST and GET /v1/transfers, GET and POST /v1/transfers/{id}, POST and GET /v1/transfers/{id}/reversals, GET /v1/transfers/{id}/reversals/{reversal}, GET /v1/accounts/{id}, GET /v1/accounts/{id}/external_accounts/{id}, GET /v1/balance, GET /v1/balance_transactions, GET /v1/balance_transactions/{id}, GET /v1/charges/{id}, GET /v1/events and GET /v1/events/{id}.", r.Method, r.URL.Path)),
		outcome: OutcomeInvalid,
	})
}
