package psp_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/event"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

// The PSP's own record lists every event, including those whose webhook was
// dropped, and stripe-go's own list iterator pages through it.
func TestStripeEventsListEveryEventEvenDroppedOnesNewestFirst(t *testing.T) {
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{StripeWebhookURL: rcv.URL, StripeWebhookSecret: stripeWhSecret}, withRun())

	var first psp.PaymentRecord
	h.do(http.MethodPost, "/_psp/payments", `{"provider":"stripe","user_id":"alice","amount":1000,"currency":"usd"}`, nil, &first)
	waitFor(t, ch)
	h.putFaults(`{"provider":"stripe","drop_payment_webhook_rate":1}`)
	var second psp.PaymentRecord
	h.do(http.MethodPost, "/_psp/payments", `{"provider":"stripe","user_id":"bob","amount":2000,"currency":"usd"}`, nil, nil)
	h.do(http.MethodPost, "/_psp/payments/"+first.ID+"/refunds", `{"amount":100}`, nil, &second)

	var dropped int
	for _, d := range h.webhooks() {
		if d.State == psp.DeliveryDropped {
			dropped++
		}
	}
	require.Equal(t, 2, dropped, "the payment and the refund webhooks were dropped")

	client := event.Client{B: h.payouts.B, Key: stripeKey}
	params := &stripe.EventListParams{}
	params.Limit = stripe.Int64(1) // one per page: the iterator follows starting_after
	it := client.List(params)
	var got []string
	for it.Next() {
		got = append(got, string(it.Event().Type))
	}
	require.NoError(t, it.Err())
	require.Equal(t, []string{"refund.created", "payment_intent.succeeded", "payment_intent.succeeded"}, got)

	var page struct {
		Data []struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Created int64  `json:"created"`
		} `json:"data"`
		HasMore bool `json:"has_more"`
	}
	auth := http.Header{"Authorization": {"Bearer " + stripeKey}}
	h.do(http.MethodGet, "/v1/events?limit=3", nil, auth, &page)
	require.Len(t, page.Data, 3)
	oldest := page.Data[2].ID
	h.do(http.MethodGet, "/v1/events?ending_before="+oldest+"&limit=1", nil, auth, &page)
	require.Len(t, page.Data, 1)
	require.True(t, page.HasMore, "one newer event is left")
	require.Equal(t, "payment_intent.succeeded", page.Data[0].Type)
	h.do(http.MethodGet, "/v1/events?type=refund.created", nil, auth, &page)
	require.Len(t, page.Data, 1)
	require.False(t, page.HasMore)

	resp := h.do(http.MethodGet, "/v1/events?starting_after=evt_nope", nil, auth, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp = h.do(http.MethodGet, "/v1/events", nil, nil, nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

func TestPaystackTransactionAndTransferListsPage(t *testing.T) {
	h := newHarness(t, psp.Config{})
	for _, u := range []string{"a", "b", "c"} {
		resp := h.do(http.MethodPost, "/_psp/payments", `{"provider":"paystack","user_id":"`+u+`","amount":500,"currency":"ngn"}`, nil, nil)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
	}
	var list struct {
		Status bool `json:"status"`
		Data   []struct {
			ID        json.Number       `json:"id"`
			Reference string            `json:"reference"`
			Status    string            `json:"status"`
			Metadata  map[string]string `json:"metadata"`
		} `json:"data"`
		Meta struct {
			Total     int `json:"total"`
			PageCount int `json:"pageCount"`
		} `json:"meta"`
	}
	h.do(http.MethodGet, "/transaction?perPage=2&page=1", nil, paystackHeader(), &list)
	require.True(t, list.Status)
	require.Len(t, list.Data, 2)
	require.Equal(t, 3, list.Meta.Total)
	require.Equal(t, 2, list.Meta.PageCount)
	require.Equal(t, "c", list.Data[0].Metadata["user_id"], "newest first")
	h.do(http.MethodGet, "/transaction?perPage=2&page=2", nil, paystackHeader(), &list)
	require.Len(t, list.Data, 1)
	require.Equal(t, "a", list.Data[0].Metadata["user_id"])
	ref := list.Data[0].Reference

	var one struct {
		Data struct {
			Reference string `json:"reference"`
		} `json:"data"`
	}
	resp := h.do(http.MethodGet, "/transaction/verify/"+ref, nil, paystackHeader(), &one)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, ref, one.Data.Reference)
	resp = h.do(http.MethodGet, "/transaction?from=2999-01-01", nil, paystackHeader(), &list)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, list.Data)
	resp = h.do(http.MethodGet, "/transaction?perPage=0", nil, paystackHeader(), nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	body := `{"source":"balance","amount":700,"recipient":"RCP_ok","reference":"po-1","currency":"NGN"}`
	resp = h.do(http.MethodPost, "/transfer", body, paystackHeader(), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	h.do(http.MethodGet, "/transfer?perPage=10", nil, paystackHeader(), &list)
	require.Len(t, list.Data, 1)
	require.Equal(t, "po-1", list.Data[0].Reference)
}
