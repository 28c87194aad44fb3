package psp

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Paystack transfer recipients: GET /transferrecipient/{id_or_code}. Every
// RCP_ code is a recipient of the integration (a nuban bank account in
// NGN), created the first time it is fetched, when it also gets its id.
// Magic values: RCP_missing* does not exist (404); RCP_usd* is a USD
// recipient.

// paystackRecipientDetails is a recipient's bank account.
type paystackRecipientDetails struct {
	AuthorizationCode *string `json:"authorization_code"`
	AccountNumber     string  `json:"account_number"`
	AccountName       *string `json:"account_name"`
	BankCode          string  `json:"bank_code"`
	BankName          string  `json:"bank_name"`
}

// paystackRecipient is Paystack's transfer recipient object.
type paystackRecipient struct {
	Active           bool                     `json:"active"`
	CreatedAt        string                   `json:"createdAt"`
	Currency         string                   `json:"currency"`
	Description      string                   `json:"description"`
	Domain           string                   `json:"domain"`
	Email            string                   `json:"email"`
	ID               int64                    `json:"id"`
	Integration      int64                    `json:"integration"`
	Metadata         map[string]any           `json:"metadata"`
	Name             string                   `json:"name"`
	RecipientCode    string                   `json:"recipient_code"`
	Type             string                   `json:"type"`
	UpdatedAt        string                   `json:"updatedAt"`
	IsDeleted        bool                     `json:"is_deleted"`
	IsDeletedCamel   bool                     `json:"isDeleted"`
	RecipientAccount string                   `json:"recipient_account"`
	InstitutionCode  string                   `json:"institution_code"`
	Details          paystackRecipientDetails `json:"details"`
}

// recipientLocked returns the integration's recipient code (or id),
// creating it the first time a code is named; nil if there is none.
func (st *state) recipientLocked(key, idOrCode string, now time.Time) *paystackRecipient {
	integration := integrationID(key)
	if n, err := strconv.ParseInt(idOrCode, 10, 64); err == nil {
		for _, rc := range st.recipients {
			if rc.ID == n && rc.Integration == integration {
				return rc
			}
		}
		return nil
	}
	if !strings.HasPrefix(idOrCode, "RCP_") || strings.HasPrefix(idOrCode, "RCP_missing") {
		return nil
	}
	if rc := st.recipients[key+"\x00"+idOrCode]; rc != nil {
		return rc
	}
	currency := "NGN"
	if strings.HasPrefix(idOrCode, "RCP_usd") {
		currency = "USD"
	}
	st.paystackSeq++
	number, name := digits(idOrCode, 10), "AEGIS USER"
	rc := &paystackRecipient{
		Active: true, CreatedAt: paystackTime(now), Currency: currency, Domain: "test", ID: st.paystackSeq,
		Integration: integration, Name: name, RecipientCode: idOrCode, Type: "nuban", UpdatedAt: paystackTime(now),
		RecipientAccount: number, InstitutionCode: "058",
		Details: paystackRecipientDetails{AccountNumber: number, AccountName: &name, BankCode: "058", BankName: "Guaranty Trust Bank"},
	}
	st.recipients[key+"\x00"+idOrCode] = rc
	return rc
}

// handlePaystackRecipient serves GET /transferrecipient/{id_or_code}.
func (s *Server) handlePaystackRecipient(w http.ResponseWriter, r *http.Request) {
	st, call := s.beginCall(r, ProviderPaystack)
	key, errBody := paystackAPIKey(r)
	if errBody != nil {
		s.respond(w, call, response{status: http.StatusUnauthorized, body: errBody, outcome: OutcomeUnauthorized})
		return
	}
	s.sleep(r.Context(), s.latency(ProviderPaystack))
	code := r.PathValue("code")
	s.mu.Lock()
	rc := st.recipientLocked(key, code, time.Now())
	var body []byte
	if rc != nil {
		body = paystackOK("Recipient retrieved", rc)
	}
	s.mu.Unlock()
	if body == nil {
		s.respond(w, call, response{status: http.StatusNotFound, body: paystackErr("Recipient not found", ""), outcome: OutcomeNotFound})
		return
	}
	s.respond(w, call, response{status: http.StatusOK, body: body, outcome: OutcomeOK, objectID: code})
}
