package psp_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

type recipientResp struct {
	Status  bool   `json:"status"`
	Message string `json:"message"`
	Data    struct {
		ID            int64  `json:"id"`
		Integration   int64  `json:"integration"`
		RecipientCode string `json:"recipient_code"`
		Type          string `json:"type"`
		Currency      string `json:"currency"`
		Active        bool   `json:"active"`
		IsDeleted     bool   `json:"isDeleted"`
		Details       struct {
			AccountNumber string `json:"account_number"`
			BankCode      string `json:"bank_code"`
			BankName      string `json:"bank_name"`
		} `json:"details"`
	} `json:"data"`
}

func TestPaystackFetchTransferRecipient(t *testing.T) {
	h := newHarness(t, psp.Config{})
	var rc recipientResp
	resp := h.do(http.MethodGet, "/transferrecipient/RCP_abc", nil, paystackHeader(), &rc)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, rc.Status)
	require.Equal(t, "RCP_abc", rc.Data.RecipientCode)
	require.Equal(t, "nuban", rc.Data.Type)
	require.Equal(t, "NGN", rc.Data.Currency)
	require.True(t, rc.Data.Active)
	require.False(t, rc.Data.IsDeleted)
	require.Len(t, rc.Data.Details.AccountNumber, 10, "a NUBAN")
	require.NotEmpty(t, rc.Data.Details.BankCode)
	require.NotEmpty(t, rc.Data.Details.BankName)

	var byID recipientResp
	resp = h.do(http.MethodGet, "/transferrecipient/"+strconv.FormatInt(rc.Data.ID, 10), nil, paystackHeader(), &byID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, rc.Data, byID.Data, "the id names the same recipient")

	var usd recipientResp
	h.do(http.MethodGet, "/transferrecipient/RCP_usd_1", nil, paystackHeader(), &usd)
	require.Equal(t, "USD", usd.Data.Currency)

	var missing recipientResp
	resp = h.do(http.MethodGet, "/transferrecipient/RCP_missing_1", nil, paystackHeader(), &missing)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.False(t, missing.Status)

	// Another integration does not see this one's recipient by id.
	other := http.Header{"Authorization": {"Bearer sk_test_other"}}
	resp = h.do(http.MethodGet, "/transferrecipient/"+strconv.FormatInt(rc.Data.ID, 10), nil, other, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp = h.do(http.MethodGet, "/transferrecipient/RCP_abc", nil, nil, nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

type balanceResp struct {
	Status bool `json:"status"`
	Data   []struct {
		Currency string `json:"currency"`
		Balance  int64  `json:"balance"`
	} `json:"data"`
}

func (h *harness) paystackBalance(currency string) int64 {
	h.t.Helper()
	var b balanceResp
	resp := h.do(http.MethodGet, "/balance", nil, paystackHeader(), &b)
	require.Equal(h.t, http.StatusOK, resp.StatusCode)
	require.True(h.t, b.Status)
	for _, e := range b.Data {
		if e.Currency == currency {
			return e.Balance
		}
	}
	return 0
}

// A Paystack transfer leaves the balance when it is made and comes back
// when it fails.
func TestPaystackBalanceFollowsTransfers(t *testing.T) {
	h := newHarness(t, psp.Config{})
	require.Equal(t, psp.DefaultBalance, h.paystackBalance("NGN"))
	resp, ok := h.paystackTransfer(transferBody("bal_ok", "RCP_ok", 50000), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, failing := h.paystackTransfer(transferBody("bal_fail", "RCP_fail_1", 20000), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, psp.DefaultBalance-70000, h.paystackBalance("NGN"))

	h.settle(ok.Data.TransferCode, `{}`)
	_, rec := h.settle(failing.Data.TransferCode, `{}`)
	require.Equal(t, "failed", rec.Status)
	require.Equal(t, psp.DefaultBalance-50000, h.paystackBalance("NGN"), "the failed transfer's amount came back")
}

func TestPaystackTransferBeyondTheBalanceIsRefused(t *testing.T) {
	h := newHarness(t, psp.Config{Balances: map[string]int64{"ngn": 1000}})
	resp, out := h.paystackTransfer(transferBody("too_much", "RCP_ok", 1001), nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "insufficient_balance", out.Code)
	require.Empty(t, h.objects())
	require.Equal(t, int64(1000), h.paystackBalance("NGN"))

	resp, _ = h.paystackTransfer(transferBody("too_much", "RCP_ok", 1000), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a refused reference is not taken")
	require.Zero(t, h.paystackBalance("NGN"))
}

func (h *harness) finalize(code, otp string) (*http.Response, paystackResp) {
	h.t.Helper()
	var out paystackResp
	resp := h.do(http.MethodPost, "/transfer/finalize_transfer", map[string]string{"transfer_code": code, "otp": otp}, paystackHeader(), &out)
	return resp, out
}

// A transfer waiting for its OTP is finalized with the right one and then
// settles; a wrong OTP, or a transfer not waiting, is refused.
func TestPaystackFinalizeTransfer(t *testing.T) {
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{SettleDelay: 20 * time.Millisecond, PaystackWebhookURL: rcv.URL, PaystackSecretKey: paystackKey}, withRun())
	h.putFaults(`{"provider":"paystack","otp_for":"1h"}`)
	resp, out := h.paystackTransfer(transferBody("fin_1", "RCP_abc", 50000), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "otp", out.Data.Status)
	code := out.Data.TransferCode

	resp, bad := h.finalize(code, "000000")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.False(t, bad.Status)
	require.Equal(t, "otp", h.objects()[0].Status, "a wrong OTP changes nothing")

	resp, done := h.finalize(code, psp.FinalizeOTP)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, done.Status)
	require.Equal(t, code, done.Data.TransferCode)
	require.Equal(t, "pending", done.Data.Status)

	got := waitFor(t, ch)
	require.Contains(t, string(got.body), `"event":"transfer.success"`, "it settles after the settle delay, not after otp_for")
	require.Equal(t, "success", h.objects()[0].Status)

	resp, again := h.finalize(code, psp.FinalizeOTP)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "no longer waiting for an OTP")
	require.False(t, again.Status)
	resp, _ = h.finalize("TRF_nope", psp.FinalizeOTP)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = h.finalize("", psp.FinalizeOTP)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}
