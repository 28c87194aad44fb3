package psp_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

// stripeCall sends a Stripe request as stripe-go would (form-encoded),
// acting for account ("" the platform) under idemKey ("" none), and decodes
// the answer into out (if non-nil).
func (h *harness) stripeCall(method, path string, form url.Values, account, idemKey string, out any) *http.Response {
	h.t.Helper()
	hdr := http.Header{"Authorization": {"Bearer " + stripeKey}, "Content-Type": {"application/x-www-form-urlencoded"}}
	if account != "" {
		hdr.Set("Stripe-Account", account)
	}
	if idemKey != "" {
		hdr.Set("Idempotency-Key", idemKey)
	}
	var body any
	if form != nil {
		body = form.Encode()
	}
	return h.do(method, path, body, hdr, out)
}

type stripeErrBody struct {
	Error struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Param   string `json:"param"`
		Message string `json:"message"`
	} `json:"error"`
}

type balanceBody struct {
	Object    string `json:"object"`
	Available []struct {
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
	} `json:"available"`
}

// available is an account's available balance in currency ("" account: the
// platform's), read through GET /v1/balance.
func (h *harness) available(account, currency string) int64 {
	h.t.Helper()
	var b balanceBody
	resp := h.stripeCall(http.MethodGet, "/v1/balance", nil, account, "", &b)
	require.Equal(h.t, http.StatusOK, resp.StatusCode)
	require.Equal(h.t, "balance", b.Object)
	for _, a := range b.Available {
		if a.Currency == currency {
			return a.Amount
		}
	}
	return 0
}

func transferForm(amount int64, currency, dest string) url.Values {
	return url.Values{"amount": {strconv.FormatInt(amount, 10)}, "currency": {currency}, "destination": {dest}}
}

// payoutForm is a payout's parameters (the same as a transfer's).
func payoutForm(amount int64, currency, dest string) url.Values {
	return transferForm(amount, currency, dest)
}

func TestConnectedAccountAndExternalAccounts(t *testing.T) {
	h := newHarness(t, psp.Config{})
	var acct struct {
		ID               string            `json:"id"`
		Object           string            `json:"object"`
		Type             string            `json:"type"`
		Country          string            `json:"country"`
		DefaultCurrency  string            `json:"default_currency"`
		ChargesEnabled   bool              `json:"charges_enabled"`
		PayoutsEnabled   bool              `json:"payouts_enabled"`
		DetailsSubmitted bool              `json:"details_submitted"`
		Capabilities     map[string]string `json:"capabilities"`
		Created          int64             `json:"created"`
	}
	resp := h.stripeCall(http.MethodGet, "/v1/accounts/acct_1User", nil, "", "", &acct)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "acct_1User", acct.ID)
	require.Equal(t, "account", acct.Object)
	require.Equal(t, "express", acct.Type)
	require.Equal(t, "US", acct.Country)
	require.Equal(t, "usd", acct.DefaultCurrency)
	require.True(t, acct.PayoutsEnabled)
	require.True(t, acct.DetailsSubmitted)
	require.Equal(t, "active", acct.Capabilities["transfers"])
	created := acct.Created
	h.stripeCall(http.MethodGet, "/v1/accounts/acct_1User", nil, "", "", &acct)
	require.Equal(t, created, acct.Created, "the account was created once")

	h.stripeCall(http.MethodGet, "/v1/accounts/acct_nopayouts_1", nil, "", "", &acct)
	require.False(t, acct.PayoutsEnabled)
	h.stripeCall(http.MethodGet, "/v1/accounts/acct_notransfers_1", nil, "", "", &acct)
	require.Equal(t, "inactive", acct.Capabilities["transfers"])

	var se stripeErrBody
	resp = h.stripeCall(http.MethodGet, "/v1/accounts/acct_missing_1", nil, "", "", &se)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, "resource_missing", se.Error.Code)
	require.Contains(t, se.Error.Message, "No such account")

	var ba map[string]any
	resp = h.stripeCall(http.MethodGet, "/v1/accounts/acct_1User/external_accounts/ba_1Bank", nil, "", "", &ba)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "bank_account", ba["object"])
	require.Equal(t, "ba_1Bank", ba["id"])
	require.Equal(t, "acct_1User", ba["account"])
	require.Equal(t, "usd", ba["currency"])
	require.Equal(t, "US", ba["country"])
	require.Len(t, ba["last4"], 4)
	require.NotEmpty(t, ba["status"])

	var card map[string]any
	h.stripeCall(http.MethodGet, "/v1/accounts/acct_1User/external_accounts/card_1Debit", nil, "", "", &card)
	require.Equal(t, "card", card["object"])
	require.Equal(t, "acct_1User", card["account"])

	for _, path := range []string{
		"/v1/accounts/acct_1User/external_accounts/ba_other_1",
		"/v1/accounts/acct_1User/external_accounts/card_other_1",
		"/v1/accounts/acct_missing_1/external_accounts/ba_1Bank",
	} {
		resp = h.stripeCall(http.MethodGet, path, nil, "", "", &se)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		require.Equal(t, "resource_missing", se.Error.Code, path)
	}

	resp = h.stripeCall(http.MethodGet, "/v1/accounts/acct_1User?bogus=1", nil, "", "", &se)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "parameter_unknown", se.Error.Code)
	require.Equal(t, "bogus", se.Error.Param)
}

func TestTransferMovesMoneyFromThePlatformToTheConnectedAccount(t *testing.T) {
	h := newHarness(t, psp.Config{})
	require.Equal(t, psp.DefaultBalance, h.available("", "usd"))
	require.Zero(t, h.available("acct_bal", "usd"))

	var tr stripe.Transfer
	resp := h.stripeCall(http.MethodPost, "/v1/transfers", transferForm(2500, "usd", "acct_bal"), "", "", &tr)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, tr.Reversed)
	require.Equal(t, psp.DefaultBalance-2500, h.available("", "usd"))
	require.Equal(t, int64(2500), h.available("acct_bal", "usd"))

	cases := map[string]struct {
		dest, code string
	}{
		"no such destination":           {"acct_missing_x", "resource_missing"},
		"destination without transfers": {"acct_notransfers_x", "insufficient_capabilities_for_transfer"},
	}
	for name, c := range cases {
		var se stripeErrBody
		resp = h.stripeCall(http.MethodPost, "/v1/transfers", transferForm(100, "usd", c.dest), "", "", &se)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, name)
		require.Equal(t, c.code, se.Error.Code, name)
		require.Equal(t, "destination", se.Error.Param, name)
	}
	require.Len(t, h.objects(), 1, "refused transfers create nothing")
	require.Equal(t, psp.DefaultBalance-2500, h.available("", "usd"), "refused transfers move nothing")
}

func TestTransferBeyondThePlatformBalanceIsRefused(t *testing.T) {
	h := newHarness(t, psp.Config{Balances: map[string]int64{"usd": 1000}})
	require.Zero(t, h.available("", "eur"), "only the configured currencies are funded")

	var se stripeErrBody
	resp := h.stripeCall(http.MethodPost, "/v1/transfers", transferForm(1001, "usd", "acct_poor"), "", "", &se)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "balance_insufficient", se.Error.Code)
	require.Empty(t, h.objects())
	require.Equal(t, int64(1000), h.available("", "usd"))

	resp = h.stripeCall(http.MethodPost, "/v1/transfers", transferForm(1000, "usd", "acct_poor"), "", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the whole balance can be transferred")
	require.Zero(t, h.available("", "usd"))
	require.Equal(t, int64(1000), h.available("acct_poor", "usd"))
}

func TestConnectedPayoutsAreScopedToTheirAccount(t *testing.T) {
	h := newHarness(t, psp.Config{})
	require.Equal(t, http.StatusOK, h.stripeCall(http.MethodPost, "/v1/transfers", transferForm(5000, "usd", "acct_u"), "", "", nil).StatusCode)

	var po stripe.Payout
	form := payoutForm(3000, "usd", "ba_u")
	form.Set("metadata[payout_id]", "pay_connect")
	resp := h.stripeCall(http.MethodPost, "/v1/payouts", form, "acct_u", "key-connect", &po)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, stripe.PayoutStatusPending, po.Status)
	require.Equal(t, "ba_u", po.Destination.ID)
	require.Equal(t, int64(2000), h.available("acct_u", "usd"), "the payout left the account's balance")

	rec := h.objects()[1]
	require.Equal(t, psp.KindPayout, rec.Kind)
	require.Equal(t, "acct_u", rec.Account)

	// Visible only with the account's header.
	require.Equal(t, http.StatusOK, h.stripeCall(http.MethodGet, "/v1/payouts/"+po.ID, nil, "acct_u", "", nil).StatusCode)
	require.Equal(t, http.StatusNotFound, h.stripeCall(http.MethodGet, "/v1/payouts/"+po.ID, nil, "", "", nil).StatusCode)
	require.Equal(t, http.StatusNotFound, h.stripeCall(http.MethodGet, "/v1/payouts/"+po.ID, nil, "acct_other", "", nil).StatusCode)
	var list struct {
		Data []stripe.Payout `json:"data"`
	}
	h.stripeCall(http.MethodGet, "/v1/payouts", nil, "acct_u", "", &list)
	require.Len(t, list.Data, 1)
	require.Equal(t, po.ID, list.Data[0].ID)
	platform, err := h.payouts.New(payoutParams("key-platform", "pay_platform", 10))
	require.NoError(t, err)
	h.stripeCall(http.MethodGet, "/v1/payouts", nil, "", "", &list)
	require.Len(t, list.Data, 1, "the platform lists its own payouts only")
	require.Equal(t, platform.ID, list.Data[0].ID)

	refusals := []struct {
		name, account, dest string
		amount              int64
		status              int
		code                string
	}{
		{"more than the balance", "acct_u", "ba_u", 2001, http.StatusBadRequest, "balance_insufficient"},
		{"not the account's bank", "acct_u", "ba_other_u", 10, http.StatusBadRequest, "resource_missing"},
		{"payouts disabled", "acct_nopayouts_u", "ba_u", 10, http.StatusBadRequest, "payouts_not_allowed"},
		{"no such account", "acct_missing_u", "ba_u", 10, http.StatusForbidden, ""},
	}
	for _, c := range refusals {
		var se stripeErrBody
		resp = h.stripeCall(http.MethodPost, "/v1/payouts", payoutForm(c.amount, "usd", c.dest), c.account, "", &se)
		require.Equal(t, c.status, resp.StatusCode, c.name)
		require.Equal(t, c.code, se.Error.Code, c.name)
		require.NotEmpty(t, se.Error.Message, c.name)
	}
	require.Len(t, h.objects(), 3, "refused payouts create nothing")
	require.Equal(t, int64(2000), h.available("acct_u", "usd"), "refused payouts move nothing")
	require.Equal(t, psp.DefaultBalance-5000, h.available("", "usd"), "platform payouts leave the platform balance as it was")
}

// Idempotency keys are scoped per API key and Stripe-Account.
func TestIdempotencyKeysAreScopedPerConnectedAccount(t *testing.T) {
	h := newHarness(t, psp.Config{})
	for _, acct := range []string{"acct_a", "acct_b"} {
		require.Equal(t, http.StatusOK, h.stripeCall(http.MethodPost, "/v1/transfers", transferForm(1000, "usd", acct), "", "", nil).StatusCode)
	}
	var a, a2, b, platform stripe.Payout
	require.Equal(t, http.StatusOK, h.stripeCall(http.MethodPost, "/v1/payouts", payoutForm(100, "usd", "ba_1"), "acct_a", "shared", &a).StatusCode)
	resp := h.stripeCall(http.MethodPost, "/v1/payouts", payoutForm(100, "usd", "ba_1"), "acct_a", "shared", &a2)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	require.Equal(t, a.ID, a2.ID)
	require.Equal(t, http.StatusOK, h.stripeCall(http.MethodPost, "/v1/payouts", payoutForm(100, "usd", "ba_1"), "acct_b", "shared", &b).StatusCode)
	require.Equal(t, http.StatusOK, h.stripeCall(http.MethodPost, "/v1/payouts", payoutForm(100, "usd", "ba_1"), "", "shared", &platform).StatusCode)
	require.NotEqual(t, a.ID, b.ID)
	require.NotEqual(t, a.ID, platform.ID)
	require.Equal(t, int64(900), h.available("acct_a", "usd"), "the replay moved nothing")
	require.Equal(t, int64(900), h.available("acct_b", "usd"))
	require.Len(t, h.objects(), 5, "two transfers and three payouts")
}

type connectEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Account string `json:"account"`
	Data    struct {
		Object json.RawMessage `json:"object"`
	} `json:"data"`
}

// A payout on a connected account settles like any payout; its events (its
// webhook and its entry in the account's /v1/events) carry the account, and
// a failed one gives the amount back to the account.
func TestConnectedPayoutEventsCarryTheAccount(t *testing.T) {
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{StripeWebhookURL: rcv.URL, StripeWebhookSecret: stripeWhSecret}, withRun())
	h.stripeCall(http.MethodPost, "/v1/transfers", transferForm(5000, "usd", "acct_ev"), "", "", nil)
	require.Equal(t, "transfer.created", eventOf(t, waitFor(t, ch)).Type)

	var paid, failed stripe.Payout
	h.stripeCall(http.MethodPost, "/v1/payouts", payoutForm(1000, "usd", "ba_ev"), "acct_ev", "", &paid)
	h.stripeCall(http.MethodPost, "/v1/payouts", payoutForm(1500, "usd", "ba_fail_ev"), "acct_ev", "", &failed)
	require.Equal(t, int64(2500), h.available("acct_ev", "usd"))

	resp, rec := h.settle(paid.ID, `{"outcome":"paid"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "paid", rec.Status)
	ev := eventOf(t, waitFor(t, ch))
	require.Equal(t, "payout.paid", ev.Type)
	require.Equal(t, "acct_ev", ev.Account)

	resp, rec = h.settle(failed.ID, `{}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "failed", rec.Status, "ba_fail* fails as for platform payouts")
	ev = eventOf(t, waitFor(t, ch))
	require.Equal(t, "payout.failed", ev.Type)
	require.Equal(t, "acct_ev", ev.Account)
	var po stripe.Payout
	require.NoError(t, json.Unmarshal(ev.Data.Object, &po))
	require.Equal(t, failed.ID, po.ID)
	require.Equal(t, stripe.PayoutFailureCodeAccountClosed, po.FailureCode)
	require.Equal(t, int64(4000), h.available("acct_ev", "usd"), "the failed payout's amount came back")

	var list struct {
		Data []connectEvent `json:"data"`
	}
	h.stripeCall(http.MethodGet, "/v1/events", nil, "acct_ev", "", &list)
	require.Len(t, list.Data, 2)
	for _, e := range list.Data {
		require.Equal(t, "acct_ev", e.Account)
	}
	require.Equal(t, []string{"payout.failed", "payout.paid"}, []string{list.Data[0].Type, list.Data[1].Type})
	var own struct {
		Data []map[string]any `json:"data"`
	}
	h.stripeCall(http.MethodGet, "/v1/events", nil, "", "", &own)
	require.Len(t, own.Data, 1, "the platform's own events only")
	require.Equal(t, "transfer.created", own.Data[0]["type"])
	require.NotContains(t, own.Data[0], "account", "a platform event names no account")
	require.Equal(t, http.StatusNotFound, h.stripeCall(http.MethodGet, "/v1/events/"+ev.ID, nil, "", "", nil).StatusCode)
	require.Equal(t, http.StatusOK, h.stripeCall(http.MethodGet, "/v1/events/"+ev.ID, nil, "acct_ev", "", nil).StatusCode)
}

// eventOf checks a delivery's signature and decodes its event.
func eventOf(t *testing.T, got received) connectEvent {
	t.Helper()
	require.NoError(t, webhook.ValidatePayload(got.body, got.header.Get("Stripe-Signature"), stripeWhSecret))
	var ev connectEvent
	require.NoError(t, json.Unmarshal(got.body, &ev))
	return ev
}
