package psp

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// paystackTransfer is Paystack's transfer object (as returned by
// POST /transfer and GET /transfer/verify/{reference}).
type paystackTransfer struct {
	Reference     string  `json:"reference"`
	Integration   int64   `json:"integration"`
	Domain        string  `json:"domain"`
	Amount        int64   `json:"amount"`
	Currency      string  `json:"currency"`
	Source        string  `json:"source"`
	Reason        string  `json:"reason"`
	Recipient     string  `json:"recipient"`
	Status        string  `json:"status"`
	TransferCode  string  `json:"transfer_code"`
	ID            int64   `json:"id"`
	TransferredAt *string `json:"transferred_at"`
	CreatedAt     string  `json:"createdAt"`
	UpdatedAt     string  `json:"updatedAt"`
}

// paystackEnvelope is every Paystack response.
type paystackEnvelope struct {
	Status  bool   `json:"status"`
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
	Data    any    `json:"data,omitempty"`
}

func paystackErr(msg, code string) []byte {
	return mustJSON(paystackEnvelope{Status: false, Message: msg, Code: code})
}

func paystackOK(msg string, data any) []byte {
	return mustJSON(paystackEnvelope{Status: true, Message: msg, Data: data})
}

type paystackDialect struct{}

func (paystackDialect) serverError(int) []byte {
	return paystackErr("An error occurred while processing your request. Please try again. (injected by the PSP stand-in)", "")
}

func (paystackDialect) rateLimited() []byte {
	return paystackErr("Too many requests. Please retry later. (injected by the PSP stand-in)", "rate_limited")
}

func (paystackDialect) timedOut() []byte {
	return paystackErr("Gateway timeout. (injected by the PSP stand-in)", "")
}

func (paystackDialect) idempotencyMismatch(string) []byte {
	return paystackErr("Keys for idempotent requests can only be used with the same parameters they were first used with.", "idempotency_error")
}

func (paystackDialect) idempotencyInUse(string) []byte {
	return paystackErr("A request with this idempotency key is still in progress. Please try again later.", "idempotency_key_in_use")
}

var (
	paystackInvalidRecipient = paystackErr("Invalid transfer recipient", "invalid_recipient")
	paystackInsufficient     = paystackErr("Your balance is not enough to fulfil this request", "insufficient_balance")
)

// paystackAPIKey returns the secret key, or the 401 body.
func paystackAPIKey(r *http.Request) (string, []byte) {
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	key = strings.TrimSpace(key)
	if !ok || !strings.EqualFold(scheme, "Bearer") || !strings.HasPrefix(key, "sk_") || len(key) < 4 {
		return "", paystackErr("Invalid key", "")
	}
	if LiveKey(key) {
		return "", paystackErr("This is the Aegis PSP stand-in: it refuses live keys; use a test key", "")
	}
	return key, nil
}

// integrationID derives a stable fake integration id from the secret key.
func integrationID(key string) int64 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return 100_000 + int64(h.Sum32()%900_000)
}

type paystackTransferReq struct {
	Source    string      `json:"source"`
	Amount    json.Number `json:"amount"`
	Recipient string      `json:"recipient"`
	Reference string      `json:"reference"`
	Reason    string      `json:"reason"`
	Currency  string      `json:"currency"`
}

func paystackTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// beginPaystackJSON starts a Paystack call with a JSON body: its secret
// key (401 without one) and the body decoded into req (400 when it is not
// JSON). ok is false once it has answered.
func (s *Server) beginPaystackJSON(w http.ResponseWriter, r *http.Request, req any) (*state, *CallRecord, string, bool) {
	st, call := s.beginCall(r, ProviderPaystack)
	key, errBody := paystackAPIKey(r)
	if errBody != nil {
		s.respond(w, call, response{status: http.StatusUnauthorized, body: errBody, outcome: OutcomeUnauthorized})
		return nil, nil, "", false
	}
	raw, err := readBody(w, r)
	if err == nil {
		err = json.Unmarshal(raw, req)
	}
	if err != nil {
		s.respond(w, call, response{status: http.StatusBadRequest, body: paystackErr("Invalid JSON body", "invalid_params"), outcome: OutcomeInvalid})
		return nil, nil, "", false
	}
	return st, call, key, true
}

func (s *Server) handlePaystackTransferCreate(w http.ResponseWriter, r *http.Request) {
	var req paystackTransferReq
	st, call, key, ok := s.beginPaystackJSON(w, r, &req)
	if !ok {
		return
	}
	s.setCallPayoutID(call, req.Reference)

	idem := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	paramsFP := strings.Join([]string{req.Source, req.Amount.String(), req.Recipient, req.Reason, strings.ToUpper(req.Currency)}, "\x00")
	op := createOp{
		provider:    ProviderPaystack,
		d:           paystackDialect{},
		st:          st,
		call:        call,
		idemKey:     idem,
		idemScope:   strings.Join([]string{string(ProviderPaystack), key, idem}, "\x00"),
		fingerprint: "POST /transfer\x00" + req.Reference + "\x00" + paramsFP,
	}
	op.exec = func(st *state, draw func() FaultKind) response {
		invalid := func(msg string) response {
			return response{status: http.StatusBadRequest, body: paystackErr(msg, "invalid_params"), outcome: OutcomeInvalid}
		}
		if req.Source == "" {
			return invalid("Source is required")
		}
		if req.Source != "balance" {
			return invalid("Invalid transfer source. Only balance is supported")
		}
		if req.Amount == "" {
			return invalid("Amount is required")
		}
		amount, err := strconv.ParseInt(req.Amount.String(), 10, 64)
		if err != nil || amount <= 0 {
			return invalid("Amount is invalid")
		}
		if req.Recipient == "" {
			return invalid("Recipient is required")
		}
		currency := strings.ToUpper(req.Currency)
		if currency == "" {
			currency = "NGN"
		}
		ref := req.Reference
		if ref == "" {
			ref = newLowerID("", 20)
		}

		refKey := key + "\x00" + ref
		if o := st.paystackRefs[refKey]; o != nil {
			if o.paystackFP != paramsFP {
				return response{status: http.StatusBadRequest, body: paystackErr("Duplicate Transfer Reference", "duplicate_reference"), outcome: OutcomeConflict, objectID: o.rec.ID}
			}
			return response{status: http.StatusOK, body: paystackOK("Transfer has been queued", o.paystack), outcome: OutcomeReplayed, objectID: o.rec.ID}
		}

		switch f := draw(); {
		case f == FaultInvalidAccount || strings.HasPrefix(req.Recipient, "RCP_invalid"):
			return response{status: http.StatusBadRequest, body: paystackInvalidRecipient, outcome: OutcomeRejected}
		case f == FaultInsufficientFunds, !st.debit(ProviderPaystack, "", currency, amount, false):
			// The amount leaves the balance now (back if it fails).
			return response{status: http.StatusBadRequest, body: paystackInsufficient, outcome: OutcomeRejected}
		}

		now := time.Now()
		st.paystackSeq++
		t := &paystackTransfer{
			Reference:    ref,
			Integration:  integrationID(key),
			Domain:       "test",
			Amount:       amount,
			Currency:     currency,
			Source:       req.Source,
			Reason:       req.Reason,
			Recipient:    req.Recipient,
			Status:       "pending",
			TransferCode: newLowerID("TRF_", 15),
			ID:           st.paystackSeq,
			CreatedAt:    paystackTime(now),
			UpdatedAt:    paystackTime(now),
		}
		o := &object{
			rec: ObjectRecord{
				Provider:       ProviderPaystack,
				Kind:           KindTransfer,
				ID:             t.TransferCode,
				IdempotencyKey: idem,
				Reference:      ref,
				PayoutID:       ref,
				Amount:         amount,
				Currency:       currency,
				Destination:    req.Recipient,
				Status:         t.Status,
				CreatedAt:      now.UTC(),
			},
			paystack:   t,
			paystackFP: paramsFP,
		}
		st.paystackRefs[refKey] = o
		s.addObjectLocked(st, o, now)
		msg := "Transfer has been queued"
		if t.Status == "otp" {
			msg = "Transfer requires OTP to continue"
		}
		return response{status: http.StatusOK, body: paystackOK(msg, t), outcome: OutcomeCreated, objectID: t.TransferCode}
	}
	s.runCreate(w, r, op)
}

// handlePaystackVerify serves GET /transfer/verify/{reference}.
func (s *Server) handlePaystackVerify(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("reference")
	s.paystackGet(w, r, ref, func(st *state, key string) *object {
		return st.paystackRefs[key+"\x00"+ref]
	})
}

// handlePaystackFetch serves GET /transfer/{id_or_code}.
func (s *Server) handlePaystackFetch(w http.ResponseWriter, r *http.Request) {
	code := r.PathValue("code")
	s.paystackGet(w, r, "", func(st *state, key string) *object {
		if o := st.byID[code]; o != nil && o.paystack != nil {
			return o
		}
		if n, err := strconv.ParseInt(code, 10, 64); err == nil {
			for _, o := range st.objects {
				if o.paystack != nil && o.paystack.ID == n {
					return o
				}
			}
		}
		return nil
	})
}

func (s *Server) paystackGet(w http.ResponseWriter, r *http.Request, payoutID string, find func(st *state, key string) *object) {
	st, call := s.beginCall(r, ProviderPaystack)
	key, errBody := paystackAPIKey(r)
	if errBody != nil {
		s.respond(w, call, response{status: http.StatusUnauthorized, body: errBody, outcome: OutcomeUnauthorized})
		return
	}
	s.sleep(r.Context(), s.latency(ProviderPaystack))
	s.mu.Lock()
	o := find(st, key)
	var body []byte
	var id string
	if o != nil && o.paystack != nil && o.paystack.Integration == integrationID(key) {
		body = paystackOK("Transfer retrieved", o.paystack)
		id = o.rec.ID
		payoutID = o.rec.PayoutID
	}
	call.PayoutID = payoutID
	s.mu.Unlock()
	if body == nil {
		s.respond(w, call, response{status: http.StatusNotFound, body: paystackErr("Transfer not found", ""), outcome: OutcomeNotFound})
		return
	}
	s.respond(w, call, response{status: http.StatusOK, body: body, outcome: OutcomeOK, objectID: id})
}
