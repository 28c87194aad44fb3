package psp_test

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

type anyEvent struct {
	Type  string          `json:"type"`  // Stripe
	Event string          `json:"event"` // Paystack
	Data  json.RawMessage `json:"data"`
}

func collect(t *testing.T, ch <-chan received, n int) []anyEvent {
	t.Helper()
	out := make([]anyEvent, 0, n)
	for range n {
		var ev anyEvent
		got := waitFor(t, ch)
		require.NoError(t, json.Unmarshal(got.body, &ev))
		out = append(out, ev)
	}
	return out
}

func types(evs []anyEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+e.Event)
	}
	sort.Strings(out)
	return out
}

func TestStripePaymentRefundsAndDisputesSendTheirWebhooks(t *testing.T) {
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{StripeWebhookURL: rcv.URL, StripeWebhookSecret: stripeWhSecret}, withRun())

	var pay psp.PaymentRecord
	resp := h.do(http.MethodPost, "/_psp/payments", `{"provider":"stripe","user_id":"alice","amount":1000,"currency":"USD"}`, nil, &pay)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	got := waitFor(t, ch)
	sig := got.header.Get("Stripe-Signature")
	ts, err := strconv.ParseInt(sig[len("t="):strings.Index(sig, ",")], 10, 64)
	require.NoError(t, err)
	require.Equal(t, psp.StripeSignature(stripeWhSecret, time.Unix(ts, 0), got.body), sig, "signed like the payout events")
	var ev struct {
		Type string `json:"type"`
		Data struct {
			Object struct {
				ID       string            `json:"id"`
				Amount   int64             `json:"amount"`
				Metadata map[string]string `json:"metadata"`
			} `json:"object"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(got.body, &ev))
	require.Equal(t, "payment_intent.succeeded", ev.Type)
	require.Equal(t, pay.ID, ev.Data.Object.ID)
	require.Equal(t, "alice", ev.Data.Object.Metadata["user_id"])

	var r1, r2, d1 psp.ReturnRecord
	require.Equal(t, http.StatusCreated, h.do(http.MethodPost, "/_psp/payments/"+pay.ID+"/refunds", `{"amount":300}`, nil, &r1).StatusCode)
	require.Equal(t, http.StatusCreated, h.do(http.MethodPost, "/_psp/payments/"+pay.ID+"/refunds", `{"amount":200,"outcome":"failed"}`, nil, &r2).StatusCode)
	require.Equal(t, http.StatusCreated, h.do(http.MethodPost, "/_psp/payments/"+pay.ID+"/disputes", `{"outcome":"lost"}`, nil, &d1).StatusCode)
	require.EqualValues(t, 700, d1.Amount, "a dispute without an amount takes what is left (the failed refund gave its 200 back)")
	require.Equal(t, "lost", d1.Status)
	require.Equal(t, []string{"charge.dispute.closed", "charge.dispute.created", "refund.created", "refund.created", "refund.updated"},
		types(collect(t, ch, 5)))

	var bad map[string]string
	resp = h.do(http.MethodPost, "/_psp/payments/"+pay.ID+"/refunds", `{"amount":1}`, nil, &bad)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "nothing is left")
	require.Contains(t, bad["error"], "at most what is left")
	resp = h.do(http.MethodPost, "/_psp/payments/pi_nope/refunds", `{}`, nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	var view psp.PaymentRecord
	h.do(http.MethodGet, "/_psp/payments/"+pay.ID, nil, nil, &view)
	require.Len(t, view.Refunds, 2)
	require.Len(t, view.Disputes, 1)
}

func TestPaystackPaymentRefundAndDisputeClosedLater(t *testing.T) {
	const secret = "sk_test_paystack_webhook"
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{PaystackWebhookURL: rcv.URL, PaystackSecretKey: secret}, withRun())

	var pay psp.PaymentRecord
	require.Equal(t, http.StatusCreated, h.do(http.MethodPost, "/_psp/payments", `{"provider":"paystack","user_id":"bola","amount":5000,"currency":"ngn"}`, nil, &pay).StatusCode)
	got := waitFor(t, ch)
	require.Equal(t, psp.PaystackSignature(secret, got.body), got.header.Get("x-paystack-signature"))

	var r, d psp.ReturnRecord
	h.do(http.MethodPost, "/_psp/payments/"+pay.ID+"/refunds", `{"amount":1000}`, nil, &r)
	h.do(http.MethodPost, "/_psp/payments/"+pay.ID+"/disputes", `{"amount":2000}`, nil, &d)
	require.Equal(t, "open", d.Status)
	var closed psp.ReturnRecord
	require.Equal(t, http.StatusOK, h.do(http.MethodPost, "/_psp/disputes/"+d.ID+"/close", `{"outcome":"won"}`, nil, &closed).StatusCode)
	require.Equal(t, "won", closed.Status)
	require.Equal(t, http.StatusConflict, h.do(http.MethodPost, "/_psp/disputes/"+d.ID+"/close", `{"outcome":"lost"}`, nil, nil).StatusCode)

	evs := collect(t, ch, 3)
	require.Equal(t, []string{"charge.dispute.create", "charge.dispute.resolve", "refund.processed"}, types(evs))
	for _, e := range evs {
		if e.Event == "charge.dispute.resolve" {
			require.Contains(t, string(e.Data), `"resolution":"declined"`)
			require.Contains(t, string(e.Data), `"reference":"`+pay.ID+`"`)
		}
	}
}
