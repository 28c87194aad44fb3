package psp_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

// error_after_create: the payout exists at the PSP, the caller is told 503,
// and a retry with the same key replays the 503 without a second payout
// (Stripe saves a 5xx once execution began).
func TestErrorAfterCreateExecutesThenAnswers503(t *testing.T) {
	h := newHarness(t, psp.Config{})
	h.putFaults(`{"provider":"stripe","error_status":503,"next":[{"kind":"error_after_create"}]}`)

	_, err := h.payouts.New(payoutParams("key-503", "payout-503", 700))
	require.Equal(t, http.StatusServiceUnavailable, stripeErr(t, err).HTTPStatusCode)
	_, err = h.payouts.New(payoutParams("key-503", "payout-503", 700))
	require.Equal(t, http.StatusServiceUnavailable, stripeErr(t, err).HTTPStatusCode, "the saved 503 is replayed")

	objs := h.objects()
	require.Len(t, objs, 1, "the create executed once")
	require.Equal(t, "payout-503", objs[0].PayoutID)
	require.Equal(t, []string{psp.OutcomeFaultErrorCreate, psp.OutcomeReplayed}, outcomes(h.calls()))
}

// otp_for: a Paystack transfer made meanwhile waits in "otp", as Paystack's
// does until the OTP is entered.
func TestOTPForHoldsAPaystackTransferInOTP(t *testing.T) {
	h := newHarness(t, psp.Config{SettleDelay: time.Millisecond}, withRun())
	h.putFaults(`{"provider":"paystack","otp_for":"1h"}`)
	resp, out := h.paystackTransfer(transferBody("otp_ref_1", "RCP_abc", 50000), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "otp", out.Data.Status)
	require.Equal(t, "Transfer requires OTP to continue", out.Message)

	var got paystackResp
	resp = h.do(http.MethodGet, "/transfer/verify/otp_ref_1", nil, paystackHeader(), &got)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "otp", got.Data.Status, "still waiting for its OTP")
	require.Equal(t, "otp", h.objects()[0].Status)
}

// Without auto-settlement (no settle delay) a transfer made under otp_for
// is still created in "otp", as Paystack's is.
func TestOTPForHoldsATransferWithoutASettleDelay(t *testing.T) {
	h := newHarness(t, psp.Config{})
	h.putFaults(`{"provider":"paystack","otp_for":"1h"}`)
	resp, out := h.paystackTransfer(transferBody("otp_ref_3", "RCP_abc", 50000), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "otp", out.Data.Status)
	require.Equal(t, "Transfer requires OTP to continue", out.Message)
	require.Equal(t, "otp", h.objects()[0].Status)
}

// After otp_for the stand-in completes the transfer and it settles.
func TestOTPForEndsWithTheTransferSettled(t *testing.T) {
	h := newHarness(t, psp.Config{SettleDelay: time.Millisecond}, withRun())
	h.putFaults(`{"provider":"paystack","otp_for":"20ms"}`)
	resp, out := h.paystackTransfer(transferBody("otp_ref_2", "RCP_abc", 50000), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "otp", out.Data.Status)
	eventually(t, "the transfer settles once its OTP is in", func() bool {
		return h.objects()[0].Status == "success"
	})
}

// pending_for: a payout created meanwhile stays pending past the settle
// delay; one made after the fault is cleared settles as usual.
func TestPendingForKeepsAPayoutPending(t *testing.T) {
	h := newHarness(t, psp.Config{SettleDelay: time.Millisecond}, withRun())
	h.putFaults(`{"provider":"stripe","pending_for":"1h"}`)
	held, err := h.payouts.New(payoutParams("key-held", "payout-held", 100))
	require.NoError(t, err)
	h.putFaults(`{}`)
	normal, err := h.payouts.New(payoutParams("key-normal", "payout-normal", 100))
	require.NoError(t, err)
	status := func(id string) string {
		for _, o := range h.objects() {
			if o.ID == id {
				return o.Status
			}
		}
		return ""
	}
	eventually(t, "the later payout is paid", func() bool { return status(normal.ID) == "paid" })
	require.Equal(t, "pending", status(held.ID), "the held payout is still pending after the other one settled")
}
