package psp_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

type reversalBody struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	Currency           string            `json:"currency"`
	Transfer           string            `json:"transfer"`
	Metadata           map[string]string `json:"metadata"`
	BalanceTransaction string            `json:"balance_transaction"`
}

// transferTo makes a platform transfer and returns it.
func (h *harness) transferTo(dest string, amount int64) stripe.Transfer {
	h.t.Helper()
	var tr stripe.Transfer
	resp := h.stripeCall(http.MethodPost, "/v1/transfers", transferForm(amount, "usd", dest), "", "", &tr)
	require.Equal(h.t, http.StatusOK, resp.StatusCode)
	return tr
}

// A reversal, partial or whole, moves money back to the platform, updates
// the transfer and is announced by transfer.reversed each time.
func TestTransferReversalsPartialThenTheRest(t *testing.T) {
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{StripeWebhookURL: rcv.URL, StripeWebhookSecret: stripeWhSecret}, withRun())
	tr := h.transferTo("acct_rev", 1000)
	require.Equal(t, "transfer.created", eventOf(t, waitFor(t, ch)).Type)

	var rv reversalBody
	form := url.Values{"amount": {"400"}, "metadata[reason]": {"clawback"}}
	resp := h.stripeCall(http.MethodPost, "/v1/transfers/"+tr.ID+"/reversals", form, "", "rev-1", &rv)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Regexp(t, `^trr_`, rv.ID)
	require.Equal(t, "transfer_reversal", rv.Object)
	require.Equal(t, int64(400), rv.Amount)
	require.Equal(t, "usd", rv.Currency)
	require.Equal(t, tr.ID, rv.Transfer)
	require.Equal(t, "clawback", rv.Metadata["reason"])
	require.Equal(t, psp.DefaultBalance-600, h.available("", "usd"))
	require.Equal(t, int64(600), h.available("acct_rev", "usd"))

	ev := eventOf(t, waitFor(t, ch))
	require.Equal(t, "transfer.reversed", ev.Type, "sent for a partial reversal too")
	var seen stripe.Transfer
	require.NoError(t, json.Unmarshal(ev.Data.Object, &seen))
	require.Equal(t, int64(400), seen.AmountReversed)
	require.False(t, seen.Reversed, "partly reversed")
	require.NotEqual(t, "failed", h.objects()[0].Status, "a part reversed leaves it paid")
	require.Len(t, seen.Reversals.Data, 1)

	// The same key replays the reversal, moving nothing more.
	var again reversalBody
	resp = h.stripeCall(http.MethodPost, "/v1/transfers/"+tr.ID+"/reversals", form, "", "rev-1", &again)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	require.Equal(t, rv.ID, again.ID)
	require.Equal(t, int64(600), h.available("acct_rev", "usd"))

	var rest reversalBody
	resp = h.stripeCall(http.MethodPost, "/v1/transfers/"+tr.ID+"/reversals", url.Values{}, "", "", &rest)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, int64(600), rest.Amount, "no amount: what is left")
	ev = eventOf(t, waitFor(t, ch))
	require.Equal(t, "transfer.reversed", ev.Type)
	require.NoError(t, json.Unmarshal(ev.Data.Object, &seen))
	require.True(t, seen.Reversed)
	require.Equal(t, int64(1000), seen.AmountReversed)
	require.Equal(t, psp.DefaultBalance, h.available("", "usd"))
	require.Zero(t, h.available("acct_rev", "usd"))

	var got stripe.Transfer
	h.stripeCall(http.MethodGet, "/v1/transfers/"+tr.ID, nil, "", "", &got)
	require.True(t, got.Reversed)
	require.Len(t, got.Reversals.Data, 2)
	require.Equal(t, rest.ID, got.Reversals.Data[0].ID, "newest first")
	var list struct {
		Data []reversalBody `json:"data"`
	}
	h.stripeCall(http.MethodGet, "/v1/transfers/"+tr.ID+"/reversals", nil, "", "", &list)
	require.Equal(t, []string{rest.ID, rv.ID}, []string{list.Data[0].ID, list.Data[1].ID})
	var one reversalBody
	require.Equal(t, http.StatusOK, h.stripeCall(http.MethodGet, "/v1/transfers/"+tr.ID+"/reversals/"+rv.ID, nil, "", "", &one).StatusCode)
	require.Equal(t, int64(400), one.Amount)
	require.Equal(t, int64(1000), h.objects()[0].AmountReversed)
	require.Equal(t, "failed", h.objects()[0].Status, "the record's verdict once all of it came back")

	var se stripeErrBody
	resp = h.stripeCall(http.MethodPost, "/v1/transfers/"+tr.ID+"/reversals", url.Values{"amount": {"1"}}, "", "", &se)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "nothing is left to reverse")
	require.Contains(t, se.Error.Message, "fully reversed")
}

func TestTransferReversalRefusals(t *testing.T) {
	h := newHarness(t, psp.Config{})
	tr := h.transferTo("acct_spent", 1000)
	// The account pays 700 out: only 300 is left to take back.
	require.Equal(t, http.StatusOK, h.stripeCall(http.MethodPost, "/v1/payouts", payoutForm(700, "usd", "ba_x"), "acct_spent", "", nil).StatusCode)

	cases := []struct {
		name, path string
		form       url.Values
		status     int
		code       string
	}{
		{"more than the destination holds", "/v1/transfers/" + tr.ID + "/reversals", url.Values{"amount": {"301"}}, http.StatusBadRequest, "balance_insufficient"},
		{"more than the transfer", "/v1/transfers/" + tr.ID + "/reversals", url.Values{"amount": {"1001"}}, http.StatusBadRequest, "parameter_invalid_integer"},
		{"unknown parameter", "/v1/transfers/" + tr.ID + "/reversals", url.Values{"reason": {"x"}}, http.StatusBadRequest, "parameter_unknown"},
		{"no such transfer", "/v1/transfers/tr_nope/reversals", url.Values{}, http.StatusNotFound, "resource_missing"},
	}
	for _, c := range cases {
		var se stripeErrBody
		resp := h.stripeCall(http.MethodPost, c.path, c.form, "", "", &se)
		require.Equal(t, c.status, resp.StatusCode, c.name)
		require.Equal(t, c.code, se.Error.Code, c.name)
	}
	require.Equal(t, int64(300), h.available("acct_spent", "usd"), "refused reversals move nothing")
	require.Zero(t, h.objects()[0].AmountReversed)

	// A transfer made by the platform is not the connected account's.
	resp := h.stripeCall(http.MethodPost, "/v1/transfers/"+tr.ID+"/reversals", url.Values{"amount": {"1"}}, "acct_spent", "", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	var rv reversalBody
	resp = h.stripeCall(http.MethodPost, "/v1/transfers/"+tr.ID+"/reversals", url.Values{"amount": {"300"}}, "", "", &rv)
	require.Equal(t, http.StatusOK, resp.StatusCode, "what the destination holds can be reversed")
	require.Zero(t, h.available("acct_spent", "usd"))
}

// The admin reversal is Stripe (or the platform) taking the money back:
// it is not refused for the destination's balance.
func TestAdminReverseTakesMoneyBackRegardless(t *testing.T) {
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{StripeWebhookURL: rcv.URL, StripeWebhookSecret: stripeWhSecret}, withRun())
	tr := h.transferTo("acct_gone", 1000)
	waitFor(t, ch)
	require.Equal(t, http.StatusOK, h.stripeCall(http.MethodPost, "/v1/payouts", payoutForm(1000, "usd", "ba_x"), "acct_gone", "", nil).StatusCode)

	var v psp.ReverseView
	resp := h.do(http.MethodPost, "/_psp/objects/"+tr.ID+"/reverse", `{"amount":250}`, nil, &v)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Regexp(t, `^trr_`, v.ReversalID)
	require.Equal(t, int64(250), v.Object.AmountReversed)
	require.Equal(t, int64(-250), h.available("acct_gone", "usd"), "the account's balance went negative")
	ev := eventOf(t, waitFor(t, ch))
	require.Equal(t, "transfer.reversed", ev.Type)

	resp = h.do(http.MethodPost, "/_psp/objects/"+tr.ID+"/reverse", `{}`, nil, &v)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, int64(1000), v.Object.AmountReversed, "0 reverses the rest")
	require.Equal(t, psp.DefaultBalance, h.available("", "usd"))

	resp = h.do(http.MethodPost, "/_psp/objects/"+tr.ID+"/reverse", `{}`, nil, nil)
	require.Equal(t, http.StatusConflict, resp.StatusCode, "nothing left")
	resp = h.do(http.MethodPost, "/_psp/objects/tr_nope/reverse", `{}`, nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// The stand-in's earlier failure of a transfer (acct_fail*) is now a full
// reversal: the money comes back and the reversal is on the transfer.
func TestFailedTransferIsReversedInFull(t *testing.T) {
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{StripeWebhookURL: rcv.URL, StripeWebhookSecret: stripeWhSecret}, withRun())
	tr := h.transferTo("acct_fail_1", 800)
	waitFor(t, ch)
	require.Equal(t, int64(800), h.available("acct_fail_1", "usd"))

	resp, rec := h.settle(tr.ID, `{}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "failed", rec.Status)
	require.Equal(t, int64(800), rec.AmountReversed)
	ev := eventOf(t, waitFor(t, ch))
	require.Equal(t, "transfer.reversed", ev.Type)
	var seen stripe.Transfer
	require.NoError(t, json.Unmarshal(ev.Data.Object, &seen))
	require.True(t, seen.Reversed)
	require.Len(t, seen.Reversals.Data, 1)
	require.Equal(t, int64(800), seen.Reversals.Data[0].Amount)
	require.Zero(t, h.available("acct_fail_1", "usd"))
	require.Equal(t, psp.DefaultBalance, h.available("", "usd"))
	eventually(t, "both deliveries", func() bool { return len(h.webhooks()) == 2 })
}

// POST /v1/transfers/{id} changes description and metadata and sends
// transfer.updated; it moves no money, so no fault is spent on it.
func TestTransferUpdateSendsTransferUpdated(t *testing.T) {
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{StripeWebhookURL: rcv.URL, StripeWebhookSecret: stripeWhSecret}, withRun())
	tr := h.transferTo("acct_upd", 100)
	waitFor(t, ch)
	h.putFaults(`{"provider":"stripe","next":[{"kind":"5xx"}]}`)

	var got stripe.Transfer
	form := url.Values{"description": {"payout 7"}, "metadata[payout_id]": {"pay_7"}}
	resp := h.stripeCall(http.MethodPost, "/v1/transfers/"+tr.ID, form, "", "", &got)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "payout 7", got.Description)
	require.Equal(t, "pay_7", got.Metadata["payout_id"])
	ev := eventOf(t, waitFor(t, ch))
	require.Equal(t, "transfer.updated", ev.Type)
	var seen stripe.Transfer
	require.NoError(t, json.Unmarshal(ev.Data.Object, &seen))
	require.Equal(t, "pay_7", seen.Metadata["payout_id"])

	var se stripeErrBody
	resp = h.stripeCall(http.MethodPost, "/v1/transfers/"+tr.ID, url.Values{"amount": {"5"}}, "", "", &se)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "parameter_unknown", se.Error.Code)

	// The queued 5xx is still there for the next money-moving request.
	resp = h.stripeCall(http.MethodPost, "/v1/transfers", transferForm(1, "usd", "acct_upd"), "", "", nil)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
}
