package psp

import (
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Stripe Connect: the platform pays a user out by a transfer to the user's
// connected account (acct_…) and a payout on that account (POST /v1/payouts
// with Stripe-Account) to one of its external accounts (ba_… or card_…).
//
// Every acct_ id exists, created the first time it is named: an express
// account in the US, default currency usd, payouts enabled and the
// transfers capability active; each ba_/card_ id is one of its external
// accounts. Magic values:
//
//	acct_missing*      no such account: 404 resource_missing on GET, a
//	                   refused Stripe-Account header, resource_missing for
//	                   a transfer's destination
//	acct_nopayouts*    payouts_enabled false: its payouts are refused
//	                   (payouts_not_allowed)
//	acct_notransfers*  capabilities.transfers "inactive": transfers to it
//	                   are refused (insufficient_capabilities_for_transfer)
//	ba_other*, card_other*  not the account's: 404 on GET, resource_missing
//	                   for a payout's destination

// connectDefaultCurrency is a connected account's default currency.
const connectDefaultCurrency = "usd"

func accountMissing(id string) bool {
	return !strings.HasPrefix(id, "acct_") || strings.HasPrefix(id, "acct_missing")
}

func accountPayoutsEnabled(id string) bool { return !strings.HasPrefix(id, "acct_nopayouts") }

func accountTransfersActive(id string) bool { return !strings.HasPrefix(id, "acct_notransfers") }

// externalAccountMissing reports whether ext is not one of an account's
// external accounts.
func externalAccountMissing(ext string) bool {
	switch {
	case strings.HasPrefix(ext, "ba_other"), strings.HasPrefix(ext, "card_other"):
		return true
	case strings.HasPrefix(ext, "ba_"), strings.HasPrefix(ext, "card_"):
		return false
	}
	return true
}

// accountCreatedLocked returns when the account was first named, creating
// it now if it was not.
func (st *state) accountCreatedLocked(id string, now time.Time) int64 {
	if c, ok := st.accounts[id]; ok {
		return c
	}
	st.accounts[id] = now.Unix()
	return st.accounts[id]
}

// digits derives n stable decimal digits from s (account and card numbers).
func digits(s string, n int) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	v := strconv.FormatUint(h.Sum64(), 10)
	for len(v) < n {
		v = "0" + v
	}
	return v[len(v)-n:]
}

// stripeBankAccount is Stripe's bank_account external account.
type stripeBankAccount struct {
	ID                     string            `json:"id"`
	Object                 string            `json:"object"`
	Account                string            `json:"account"`
	AccountHolderName      *string           `json:"account_holder_name"`
	AccountHolderType      *string           `json:"account_holder_type"`
	AccountType            *string           `json:"account_type"`
	AvailablePayoutMethods []string          `json:"available_payout_methods"`
	BankName               string            `json:"bank_name"`
	Country                string            `json:"country"`
	Currency               string            `json:"currency"`
	Customer               *string           `json:"customer"`
	DefaultForCurrency     bool              `json:"default_for_currency"`
	Fingerprint            string            `json:"fingerprint"`
	Last4                  string            `json:"last4"`
	Metadata               map[string]string `json:"metadata"`
	RoutingNumber          string            `json:"routing_number"`
	Status                 string            `json:"status"`
}

// stripeCard is Stripe's card external account.
type stripeCard struct {
	ID                     string            `json:"id"`
	Object                 string            `json:"object"`
	Account                string            `json:"account"`
	AvailablePayoutMethods []string          `json:"available_payout_methods"`
	Brand                  string            `json:"brand"`
	Country                string            `json:"country"`
	Currency               string            `json:"currency"`
	Customer               *string           `json:"customer"`
	DefaultForCurrency     bool              `json:"default_for_currency"`
	ExpMonth               int               `json:"exp_month"`
	ExpYear                int               `json:"exp_year"`
	Fingerprint            string            `json:"fingerprint"`
	Funding                string            `json:"funding"`
	Last4                  string            `json:"last4"`
	Metadata               map[string]string `json:"metadata"`
	Name                   *string           `json:"name"`
	Status                 *string           `json:"status"`
}

// externalAccount renders one of acct's external accounts.
func externalAccount(acct, ext string) any {
	if strings.HasPrefix(ext, "card_") {
		return stripeCard{ID: ext, Object: "card", Account: acct, AvailablePayoutMethods: []string{"standard", "instant"},
			Brand: "Visa", Country: "US", Currency: connectDefaultCurrency, ExpMonth: 12, ExpYear: time.Now().Year() + 3,
			Fingerprint: digits("fp"+ext, 16), Funding: "debit", Last4: digits(ext, 4), Metadata: map[string]string{}}
	}
	holder, kind := "Aegis User", "individual"
	return stripeBankAccount{ID: ext, Object: "bank_account", Account: acct, AccountHolderName: &holder,
		AccountHolderType: &kind, AvailablePayoutMethods: []string{"standard"}, BankName: "STRIPE TEST BANK",
		Country: "US", Currency: connectDefaultCurrency, DefaultForCurrency: strings.HasPrefix(ext, "ba_default"),
		Fingerprint: digits("fp"+ext, 16), Last4: digits(ext, 4), Metadata: map[string]string{},
		RoutingNumber: "110000000", Status: "verified"}
}

// stripeAccount is Stripe's account object, as a platform retrieves one of
// its connected accounts.
type stripeAccount struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	BusinessProfile    map[string]any    `json:"business_profile"`
	BusinessType       *string           `json:"business_type"`
	Capabilities       map[string]string `json:"capabilities"`
	ChargesEnabled     bool              `json:"charges_enabled"`
	Controller         map[string]any    `json:"controller"`
	Country            string            `json:"country"`
	Created            int64             `json:"created"`
	DefaultCurrency    string            `json:"default_currency"`
	DetailsSubmitted   bool              `json:"details_submitted"`
	Email              *string           `json:"email"`
	ExternalAccounts   stripeList        `json:"external_accounts"`
	FutureRequirements map[string]any    `json:"future_requirements"`
	Metadata           map[string]string `json:"metadata"`
	PayoutsEnabled     bool              `json:"payouts_enabled"`
	Requirements       map[string]any    `json:"requirements"`
	Settings           map[string]any    `json:"settings"`
	TosAcceptance      map[string]any    `json:"tos_acceptance"`
	Type               string            `json:"type"`
}

func requirementsNone() map[string]any {
	return map[string]any{"alternatives": []any{}, "current_deadline": nil, "currently_due": []any{},
		"disabled_reason": nil, "errors": []any{}, "eventually_due": []any{}, "past_due": []any{},
		"pending_verification": []any{}}
}

// connectedAccount renders the connected account id as it is now.
func connectedAccount(id string, created int64) stripeAccount {
	transfers := "active"
	if !accountTransfersActive(id) {
		transfers = "inactive"
	}
	typ := "individual"
	reqs := requirementsNone()
	if !accountPayoutsEnabled(id) {
		reqs["disabled_reason"] = "requirements.past_due"
		reqs["past_due"] = []any{"external_account"}
		reqs["currently_due"] = []any{"external_account"}
	}
	ba := "ba_default_" + strings.TrimPrefix(id, "acct_")
	return stripeAccount{
		ID: id, Object: "account",
		BusinessProfile: map[string]any{"mcc": nil, "name": nil, "product_description": nil, "support_email": nil,
			"support_phone": nil, "support_url": nil, "url": nil},
		BusinessType:     &typ,
		Capabilities:     map[string]string{"transfers": transfers},
		ChargesEnabled:   true,
		Controller:       map[string]any{"type": "application", "is_controller": true},
		Country:          "US",
		Created:          created,
		DefaultCurrency:  connectDefaultCurrency,
		DetailsSubmitted: true,
		ExternalAccounts: stripeList{Object: "list", Data: []any{externalAccount(id, ba)}, TotalCount: 1,
			URL: "/v1/accounts/" + id + "/external_accounts"},
		FutureRequirements: requirementsNone(),
		Metadata:           map[string]string{},
		PayoutsEnabled:     accountPayoutsEnabled(id),
		Requirements:       reqs,
		Settings: map[string]any{"payouts": map[string]any{"debit_negative_balances": true,
			"schedule": map[string]any{"delay_days": 2, "interval": "manual"}, "statement_descriptor": nil}},
		TosAcceptance: map[string]any{"date": created},
		Type:          "express",
	}
}

// noSuchAccountHeader is Stripe's answer to a Stripe-Account header naming
// an account the key cannot act for (or that does not exist).
func noSuchAccountHeader(key, account string) response {
	return response{status: http.StatusForbidden, outcome: OutcomeUnauthorized, body: stripeErr("invalid_request_error", "", "",
		fmt.Sprintf("The provided key '%s' does not have access to account '%s' (or that account does not exist). Application access may have been revoked.",
			maskKey(key), account))}
}

// stripeAccountOf reads the Stripe-Account header: "" for the platform, or
// the connected account the request acts for. A header naming no account
// gives the answer to send instead.
func stripeAccountOf(r *http.Request, key string) (string, *response) {
	account := strings.TrimSpace(r.Header.Get("Stripe-Account"))
	if account != "" && accountMissing(account) {
		res := noSuchAccountHeader(key, account)
		return "", &res
	}
	return account, nil
}

// beginStripeRead does the common preamble of a Stripe read: call record,
// auth, Stripe-Account, latency. ok is false if a response was written.
func (s *Server) beginStripeRead(w http.ResponseWriter, r *http.Request) (st *state, call *CallRecord, account string, ok bool) {
	st, call = s.beginCall(r, ProviderStripe)
	key, errBody := stripeAPIKey(r)
	if errBody != nil {
		s.respond(w, call, response{status: http.StatusUnauthorized, body: errBody, outcome: OutcomeUnauthorized})
		return nil, nil, "", false
	}
	account, bad := stripeAccountOf(r, key)
	if bad != nil {
		s.respond(w, call, *bad)
		return nil, nil, "", false
	}
	s.sleep(r.Context(), s.latency(ProviderStripe))
	return st, call, account, true
}

// onlyQuery refuses query parameters other than allowed (and expand),
// as Stripe refuses unknown parameters.
func onlyQuery(r *http.Request, allowed ...string) *response {
	for k := range r.URL.Query() {
		if k == "expand[]" || strings.HasPrefix(k, "expand[") {
			continue
		}
		if !slices.Contains(allowed, k) {
			res := response{status: http.StatusBadRequest, outcome: OutcomeInvalid,
				body: (&paramError{code: "parameter_unknown", param: k, msg: "Received unknown parameter: " + k}).body()}
			return &res
		}
	}
	return nil
}

func resourceMissing(param, what, id string) response {
	return response{status: http.StatusNotFound, outcome: OutcomeNotFound,
		body: stripeErr("invalid_request_error", "resource_missing", param, fmt.Sprintf("No such %s: '%s'", what, id))}
}

// handleStripeAccount serves GET /v1/accounts/{id}.
func (s *Server) handleStripeAccount(w http.ResponseWriter, r *http.Request) {
	_, call, _, ok := s.beginStripeRead(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if bad := onlyQuery(r); bad != nil {
		s.respond(w, call, *bad)
		return
	}
	if accountMissing(id) {
		s.respond(w, call, resourceMissing("account", "account", id))
		return
	}
	s.mu.Lock()
	created := s.st.accountCreatedLocked(id, time.Now())
	s.mu.Unlock()
	s.respond(w, call, response{status: http.StatusOK, body: mustJSON(connectedAccount(id, created)), outcome: OutcomeOK, objectID: id})
}

// handleStripeExternalAccount serves
// GET /v1/accounts/{id}/external_accounts/{ext}.
func (s *Server) handleStripeExternalAccount(w http.ResponseWriter, r *http.Request) {
	_, call, _, ok := s.beginStripeRead(w, r)
	if !ok {
		return
	}
	id, ext := r.PathValue("id"), r.PathValue("ext")
	if bad := onlyQuery(r); bad != nil {
		s.respond(w, call, *bad)
		return
	}
	if accountMissing(id) {
		s.respond(w, call, resourceMissing("account", "account", id))
		return
	}
	if externalAccountMissing(ext) {
		s.respond(w, call, resourceMissing("id", "external account", ext))
		return
	}
	s.mu.Lock()
	s.st.accountCreatedLocked(id, time.Now())
	s.mu.Unlock()
	s.respond(w, call, response{status: http.StatusOK, body: mustJSON(externalAccount(id, ext)), outcome: OutcomeOK, objectID: ext})
}
