package psp_test

import (
	"crypto/hmac"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

const (
	stripeWhSecret = "whsec_test_standin"
)

type received struct {
	body   []byte
	header http.Header
}

// receiver is an httptest webhook endpoint; fail decides, per attempt
// (1-based), whether to answer 500.
func receiver(t *testing.T, fail func(attempt int64) bool) (*httptest.Server, <-chan received, *atomic.Int64) {
	t.Helper()
	ch := make(chan received, 64)
	var attempts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := attempts.Add(1)
		body, _ := io.ReadAll(r.Body)
		if fail != nil && fail(n) {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		ch <- received{body: body, header: r.Header.Clone()}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv, ch, &attempts
}

func waitFor(t *testing.T, ch <-chan received) received {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook received")
		return received{}
	}
}

func (h *harness) settle(id, body string) (*http.Response, psp.ObjectRecord) {
	h.t.Helper()
	var rec psp.ObjectRecord
	resp := h.do(http.MethodPost, "/_psp/objects/"+id+"/settle", body, nil, &rec)
	return resp, rec
}

func TestStripePayoutPaidWebhook(t *testing.T) {
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{StripeWebhookURL: rcv.URL, StripeWebhookSecret: stripeWhSecret}, withRun())

	p, err := h.payouts.New(payoutParams("key-wh", "pay_wh", 1234))
	require.NoError(t, err)

	resp, rec := h.settle(p.ID, `{"outcome":"paid"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "paid", rec.Status)
	require.NotNil(t, rec.SettledAt)

	got := waitFor(t, ch)
	sig := got.header.Get("Stripe-Signature")
	require.Regexp(t, `^t=\d+,v1=[0-9a-f]{64}$`, sig)
	require.NoError(t, webhook.ValidatePayload(got.body, sig, stripeWhSecret))
	require.Error(t, webhook.ValidatePayload(got.body, sig, "whsec_wrong"))

	ev, err := webhook.ConstructEvent(got.body, sig, stripeWhSecret)
	require.NoError(t, err, "api_version matches stripe-go v76")
	require.Equal(t, stripe.EventType("payout.paid"), ev.Type)
	require.Regexp(t, `^evt_`, ev.ID)
	require.Equal(t, stripe.APIVersion, ev.APIVersion)
	require.False(t, ev.Livemode)

	var paid stripe.Payout
	require.NoError(t, json.Unmarshal(ev.Data.Raw, &paid))
	require.Equal(t, p.ID, paid.ID)
	require.Equal(t, stripe.PayoutStatusPaid, paid.Status)
	require.Equal(t, "pay_wh", paid.Metadata["payout_id"])

	var raw map[string]any
	require.NoError(t, json.Unmarshal(got.body, &raw))
	require.Equal(t, map[string]any{"id": nil, "idempotency_key": nil}, raw["request"])
	require.EqualValues(t, 1, raw["pending_webhooks"])

	// GET shows the new state; the idempotent replay still shows the
	// original response, as Stripe does.
	cur, err := h.payouts.Get(p.ID, nil)
	require.NoError(t, err)
	require.Equal(t, stripe.PayoutStatusPaid, cur.Status)
	replay, err := h.payouts.New(payoutParams("key-wh", "pay_wh", 1234))
	require.NoError(t, err)
	require.Equal(t, stripe.PayoutStatusPending, replay.Status)

	eventually(t, "delivery to be recorded", func() bool {
		whs := h.webhooks()
		return len(whs) == 1 && whs[0].State == psp.DeliveryDelivered
	})
	wh := h.webhooks()[0]
	require.Equal(t, ev.ID, wh.EventID)
	require.Equal(t, "payout.paid", wh.Type)
	require.Equal(t, rcv.URL, wh.URL)
	require.Equal(t, 1, wh.Attempts)
	require.Equal(t, http.StatusOK, wh.LastStatus)
	require.Equal(t, p.ID, wh.ObjectID)

	resp, _ = h.settle(p.ID, `{"outcome":"failed"}`)
	require.Equal(t, http.StatusConflict, resp.StatusCode, "already settled")
	resp, _ = h.settle("po_unknown", `{}`)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = h.settle(p.ID, `{"outcome":"maybe"}`)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

func TestStripePayoutAutoSettlesFailedForBaFail(t *testing.T) {
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{
		StripeWebhookURL:    rcv.URL,
		StripeWebhookSecret: stripeWhSecret,
		SettleDelay:         20 * time.Millisecond,
	}, withRun())

	params := payoutParams("key-fail", "pay_fail", 99)
	params.Destination = stripe.String("ba_fail_closed")
	p, err := h.payouts.New(params)
	require.NoError(t, err)
	require.Equal(t, stripe.PayoutStatusPending, p.Status)

	got := waitFor(t, ch)
	ev, err := webhook.ConstructEvent(got.body, got.header.Get("Stripe-Signature"), stripeWhSecret)
	require.NoError(t, err)
	require.Equal(t, stripe.EventType("payout.failed"), ev.Type)
	var failed stripe.Payout
	require.NoError(t, json.Unmarshal(ev.Data.Raw, &failed))
	require.Equal(t, p.ID, failed.ID)
	require.Equal(t, stripe.PayoutStatusFailed, failed.Status)
	require.Equal(t, stripe.PayoutFailureCodeAccountClosed, failed.FailureCode)
	require.NotEmpty(t, failed.FailureMessage)

	objs := h.objects()
	require.Equal(t, "failed", objs[0].Status)
	require.Equal(t, "account_closed", objs[0].FailureCode)
}

func TestStripeManualFailureCode(t *testing.T) {
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{StripeWebhookURL: rcv.URL, StripeWebhookSecret: stripeWhSecret}, withRun())
	p, err := h.payouts.New(payoutParams("k", "p", 1))
	require.NoError(t, err)
	resp, rec := h.settle(p.ID, `{"outcome":"failed","failure_code":"could_not_process"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "failed", rec.Status)
	got := waitFor(t, ch)
	ev, err := webhook.ConstructEvent(got.body, got.header.Get("Stripe-Signature"), stripeWhSecret)
	require.NoError(t, err)
	var failed stripe.Payout
	require.NoError(t, json.Unmarshal(ev.Data.Raw, &failed))
	require.Equal(t, stripe.PayoutFailureCodeCouldNotProcess, failed.FailureCode)
}

func TestStripeTransferWebhooks(t *testing.T) {
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{StripeWebhookURL: rcv.URL, StripeWebhookSecret: stripeWhSecret}, withRun())
	tp := &stripe.TransferParams{Amount: stripe.Int64(10), Currency: stripe.String("usd"), Destination: stripe.String("acct_1")}
	tr, err := h.transfer.New(tp)
	require.NoError(t, err)

	got := waitFor(t, ch)
	ev, err := webhook.ConstructEvent(got.body, got.header.Get("Stripe-Signature"), stripeWhSecret)
	require.NoError(t, err)
	require.Equal(t, stripe.EventType("transfer.created"), ev.Type)

	resp, _ := h.settle(tr.ID, `{"outcome":"failed"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got = waitFor(t, ch)
	ev, err = webhook.ConstructEvent(got.body, got.header.Get("Stripe-Signature"), stripeWhSecret)
	require.NoError(t, err)
	require.Equal(t, stripe.EventType("transfer.reversed"), ev.Type)
	var reversed stripe.Transfer
	require.NoError(t, json.Unmarshal(ev.Data.Raw, &reversed))
	require.True(t, reversed.Reversed)
	require.Equal(t, int64(10), reversed.AmountReversed)
}

func TestPaystackWebhookSignature(t *testing.T) {
	const secret = "sk_test_paystack_webhook"
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{
		PaystackWebhookURL: rcv.URL,
		PaystackSecretKey:  secret,
		SettleDelay:        10 * time.Millisecond,
	}, withRun())

	_, ok := h.paystackTransfer(transferBody("pay_ps_ok", "RCP_good", 100), nil)
	require.True(t, ok.Status)
	got := waitFor(t, ch)

	mac := hmac.New(sha512.New, []byte(secret))
	mac.Write(got.body)
	want := hex.EncodeToString(mac.Sum(nil))
	require.Equal(t, want, got.header.Get("x-paystack-signature"))
	require.Equal(t, want, psp.PaystackSignature(secret, got.body))

	var ev struct {
		Event string           `json:"event"`
		Data  paystackTransfer `json:"data"`
	}
	require.NoError(t, json.Unmarshal(got.body, &ev))
	require.Equal(t, "transfer.success", ev.Event)
	require.Equal(t, "pay_ps_ok", ev.Data.Reference)
	require.Equal(t, "success", ev.Data.Status)
	require.Equal(t, ok.Data.TransferCode, ev.Data.TransferCode)

	var verify paystackResp
	h.do(http.MethodGet, "/transfer/verify/pay_ps_ok", nil, paystackHeader(), &verify)
	require.Equal(t, "success", verify.Data.Status)

	_, _ = h.paystackTransfer(transferBody("pay_ps_fail", "RCP_fail_x", 100), nil)
	got = waitFor(t, ch)
	require.NoError(t, json.Unmarshal(got.body, &ev))
	require.Equal(t, "transfer.failed", ev.Event)
	require.Equal(t, "failed", ev.Data.Status)
}

func TestWebhookRetriesWithBackoff(t *testing.T) {
	rcv, ch, attempts := receiver(t, func(n int64) bool { return n <= 2 })
	h := newHarness(t, psp.Config{
		StripeWebhookURL:    rcv.URL,
		StripeWebhookSecret: stripeWhSecret,
		WebhookBackoff:      5 * time.Millisecond,
	}, withRun())
	p, err := h.payouts.New(payoutParams("k", "p", 1))
	require.NoError(t, err)
	h.settle(p.ID, `{}`)

	got := waitFor(t, ch)
	require.NoError(t, webhook.ValidatePayload(got.body, got.header.Get("Stripe-Signature"), stripeWhSecret))
	eventually(t, "delivery to be recorded", func() bool {
		whs := h.webhooks()
		return len(whs) == 1 && whs[0].State == psp.DeliveryDelivered
	})
	wh := h.webhooks()[0]
	require.Equal(t, 3, wh.Attempts)
	require.Equal(t, http.StatusOK, wh.LastStatus)
	require.EqualValues(t, 3, attempts.Load())
}

func TestWebhookGivesUpAfterMaxAttempts(t *testing.T) {
	rcv, _, attempts := receiver(t, func(int64) bool { return true })
	h := newHarness(t, psp.Config{
		StripeWebhookURL:    rcv.URL,
		StripeWebhookSecret: stripeWhSecret,
		WebhookBackoff:      time.Millisecond,
		WebhookMaxAttempts:  3,
	}, withRun())
	p, err := h.payouts.New(payoutParams("k", "p", 1))
	require.NoError(t, err)
	h.settle(p.ID, `{}`)
	eventually(t, "delivery to fail", func() bool {
		whs := h.webhooks()
		return len(whs) == 1 && whs[0].State == psp.DeliveryFailed
	})
	wh := h.webhooks()[0]
	require.Equal(t, 3, wh.Attempts)
	require.Equal(t, http.StatusInternalServerError, wh.LastStatus)
	require.EqualValues(t, 3, attempts.Load())
}

func TestWebhookConnectionErrorsAreRecordedAndShutdownStops(t *testing.T) {
	// A URL nobody listens on: take a port and close it.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()

	h := newHarness(t, psp.Config{
		StripeWebhookURL:    deadURL,
		StripeWebhookSecret: stripeWhSecret,
		WebhookBackoff:      time.Hour, // the second attempt never comes in this test
	}, withRun())
	p, err := h.payouts.New(payoutParams("k", "p", 1))
	require.NoError(t, err)
	h.settle(p.ID, `{}`)
	eventually(t, "first attempt", func() bool {
		whs := h.webhooks()
		return len(whs) == 1 && whs[0].Attempts == 1 && whs[0].LastError != ""
	})
	wh := h.webhooks()[0]
	require.Equal(t, psp.DeliveryPending, wh.State)
	require.Zero(t, wh.LastStatus)
	// The harness cleanup cancels Run; it must return promptly with the
	// retry still scheduled an hour away (goleak checks nothing is left).
}

func TestSettleWithoutWebhookURL(t *testing.T) {
	h := newHarness(t, psp.Config{}, withRun())
	p, err := h.payouts.New(payoutParams("k", "p", 1))
	require.NoError(t, err)
	resp, rec := h.settle(p.ID, `{"outcome":"paid"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "paid", rec.Status)
	require.Empty(t, h.webhooks())

	_, created := h.paystackTransfer(transferBody("r1", "RCP_x", 5), nil)
	resp, rec = h.settle(created.Data.TransferCode, `{"outcome":"failed"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "failed", rec.Status)
	require.Empty(t, h.webhooks())
}

func TestAutoSettleWithoutRunDoesNothing(t *testing.T) {
	h := newHarness(t, psp.Config{SettleDelay: time.Millisecond})
	p, err := h.payouts.New(payoutParams("k", "p", 1))
	require.NoError(t, err)
	got, err := h.payouts.Get(p.ID, nil)
	require.NoError(t, err)
	require.Equal(t, stripe.PayoutStatusPending, got.Status)
}

func TestAutoSettlePaid(t *testing.T) {
	h := newHarness(t, psp.Config{SettleDelay: 10 * time.Millisecond}, withRun())
	p, err := h.payouts.New(payoutParams("k", "p", 1))
	require.NoError(t, err)
	eventually(t, "auto-settlement", func() bool {
		objs := h.objects()
		return len(objs) == 1 && objs[0].Status == "paid"
	})
	got, err := h.payouts.Get(p.ID, nil)
	require.NoError(t, err)
	require.Equal(t, stripe.PayoutStatusPaid, got.Status)
}

// drop_webhook_rate loses the event for good: nothing is ever sent, the
// delivery shows "dropped", and the object itself (what a lookup reads)
// is settled all the same.
func TestDroppedWebhookIsNeverSent(t *testing.T) {
	rcv, ch, attempts := receiver(t, nil)
	h := newHarness(t, psp.Config{
		StripeWebhookURL:    rcv.URL,
		StripeWebhookSecret: stripeWhSecret,
		WebhookBackoff:      5 * time.Millisecond,
	}, withRun())
	h.putFaults(`{"drop_webhook_rate":1}`)
	dropped, err := h.payouts.New(payoutParams("k1", "p1", 1))
	require.NoError(t, err)
	_, rec := h.settle(dropped.ID, `{}`)
	require.Equal(t, "paid", rec.Status)

	h.putFaults(`{}`)
	sent, err := h.payouts.New(payoutParams("k2", "p2", 1))
	require.NoError(t, err)
	h.settle(sent.ID, `{}`)
	got := waitFor(t, ch)
	require.Contains(t, string(got.body), sent.ID, "the first event to arrive is the second payout's")
	eventually(t, "both deliveries to be recorded", func() bool {
		whs := h.webhooks()
		return len(whs) == 2 && whs[1].State == psp.DeliveryDelivered
	})
	whs := h.webhooks()
	require.Equal(t, psp.DeliveryDropped, whs[0].State)
	require.Equal(t, dropped.ID, whs[0].ObjectID)
	require.Zero(t, whs[0].Attempts)
	require.EqualValues(t, 1, attempts.Load())

	resp := h.do(http.MethodPut, "/_psp/faults", `{"drop_webhook_rate":1.5}`, nil, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a rate outside [0,1] is refused")
}
