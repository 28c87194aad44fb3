package psp_test

import (
	"encoding/json"
	"net/http"
	"strconv"
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

func TestPaystackRefundAndDisputeListsAsTheAPI(t *testing.T) {
	h := newHarness(t, psp.Config{})
	var pay, other psp.PaymentRecord
	h.do(http.MethodPost, "/_psp/payments", `{"provider":"paystack","user_id":"a","amount":5000,"currency":"ngn"}`, nil, &pay)
	h.do(http.MethodPost, "/_psp/payments", `{"provider":"paystack","user_id":"b","amount":900,"currency":"ngn"}`, nil, &other)
	var r1, r2, d1, d2 psp.ReturnRecord
	h.do(http.MethodPost, "/_psp/payments/"+pay.ID+"/refunds", `{"amount":1000}`, nil, &r1)
	h.do(http.MethodPost, "/_psp/payments/"+pay.ID+"/refunds", `{"amount":500,"outcome":"failed"}`, nil, &r2)
	h.do(http.MethodPost, "/_psp/payments/"+pay.ID+"/disputes", `{"amount":2000}`, nil, &d1)
	h.do(http.MethodPost, "/_psp/payments/"+other.ID+"/disputes", `{"outcome":"lost"}`, nil, &d2)

	type txn struct {
		ID        int64  `json:"id"`
		Reference string `json:"reference"`
	}
	var refunds struct {
		Status bool `json:"status"`
		Data   []struct {
			ID              string `json:"id"`
			RefundReference string `json:"refund_reference"`
			Transaction     txn    `json:"transaction"`
			Amount          int64  `json:"amount"`
			Currency        string `json:"currency"`
			Status          string `json:"status"`
			CreatedAt       string `json:"createdAt"`
		} `json:"data"`
		Meta struct {
			Total, PageCount int
		} `json:"meta"`
	}
	resp := h.do(http.MethodGet, "/refund?perPage=1&page=1", nil, paystackHeader(), &refunds)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, refunds.Status)
	require.Equal(t, 2, refunds.Meta.Total)
	require.Equal(t, 2, refunds.Meta.PageCount)
	require.Len(t, refunds.Data, 1)
	require.Equal(t, r2.ID, refunds.Data[0].ID, "newest first")
	require.Equal(t, "failed", refunds.Data[0].Status)
	h.do(http.MethodGet, "/refund?perPage=1&page=2", nil, paystackHeader(), &refunds)
	require.Equal(t, r1.ID, refunds.Data[0].ID)
	require.Equal(t, r1.ID, refunds.Data[0].RefundReference, "the id its webhook carries")
	require.Equal(t, "processed", refunds.Data[0].Status)
	require.Equal(t, int64(1000), refunds.Data[0].Amount)
	require.Equal(t, "NGN", refunds.Data[0].Currency)
	require.Equal(t, pay.ID, refunds.Data[0].Transaction.Reference)
	h.do(http.MethodGet, "/refund?from=2999-01-01", nil, paystackHeader(), &refunds)
	require.Empty(t, refunds.Data)
	h.do(http.MethodGet, "/refund?reference="+other.ID, nil, paystackHeader(), &refunds)
	require.Empty(t, refunds.Data)
	require.Equal(t, http.StatusBadRequest, h.do(http.MethodGet, "/refund?perPage=101", nil, paystackHeader(), nil).StatusCode)
	require.Equal(t, http.StatusUnauthorized, h.do(http.MethodGet, "/refund", nil, nil, nil).StatusCode)

	var disputes struct {
		Data []struct {
			ID           json.Number `json:"id"`
			RefundAmount int64       `json:"refund_amount"`
			Status       string      `json:"status"`
			Resolution   *string     `json:"resolution"`
			Transaction  txn         `json:"transaction"`
		} `json:"data"`
	}
	h.do(http.MethodGet, "/dispute?perPage=10", nil, paystackHeader(), &disputes)
	require.Len(t, disputes.Data, 2)
	require.Equal(t, d2.ID, disputes.Data[0].ID.String(), "newest first")
	require.Equal(t, "resolved", disputes.Data[0].Status)
	require.Equal(t, "merchant-accepted", *disputes.Data[0].Resolution, "lost")
	require.Equal(t, other.ID, disputes.Data[0].Transaction.Reference)
	require.Equal(t, d1.ID, disputes.Data[1].ID.String())
	require.Equal(t, "awaiting-merchant-feedback", disputes.Data[1].Status)
	require.Nil(t, disputes.Data[1].Resolution)
	require.Equal(t, int64(2000), disputes.Data[1].RefundAmount)

	h.do(http.MethodPost, "/_psp/disputes/"+d1.ID+"/close", `{"outcome":"won"}`, nil, nil)
	h.do(http.MethodGet, "/dispute?status=resolved", nil, paystackHeader(), &disputes)
	require.Len(t, disputes.Data, 2)
	require.Equal(t, "declined", *disputes.Data[1].Resolution, "won")
	h.do(http.MethodGet, "/dispute?transaction="+strconv.FormatInt(disputes.Data[0].Transaction.ID, 10), nil, paystackHeader(), &disputes)
	require.Len(t, disputes.Data, 1)
	require.Equal(t, d2.ID, disputes.Data[0].ID.String())
}
