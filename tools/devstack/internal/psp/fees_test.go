package psp_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/balancetransaction"
	"github.com/stripe/stripe-go/v76/charge"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

// pay tells the stand-in a customer paid and returns the payment.
func (h *harness) pay(provider string, amount int64, currency string) psp.PaymentRecord {
	h.t.Helper()
	var p psp.PaymentRecord
	resp := h.do(http.MethodPost, "/_psp/payments", fmt.Sprintf(`{"provider":%q,"user_id":"fee-user","amount":%d,"currency":%q}`,
		provider, amount, currency), nil, &p)
	require.Equal(h.t, http.StatusCreated, resp.StatusCode)
	return p
}

// btxn is a balance transaction as the stand-in renders it.
type btxn struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Amount      int64  `json:"amount"`
	AvailableOn int64  `json:"available_on"`
	Created     int64  `json:"created"`
	Currency    string `json:"currency"`
	Fee         int64  `json:"fee"`
	FeeDetails  []struct {
		Amount      int64   `json:"amount"`
		Application *string `json:"application"`
		Currency    string  `json:"currency"`
		Description string  `json:"description"`
		Type        string  `json:"type"`
	} `json:"fee_details"`
	Net               int64  `json:"net"`
	ReportingCategory string `json:"reporting_category"`
	Source            string `json:"source"`
	Status            string `json:"status"`
	Type              string `json:"type"`
}

type btxnList struct {
	Object  string `json:"object"`
	URL     string `json:"url"`
	Data    []btxn `json:"data"`
	HasMore bool   `json:"has_more"`
}

// txns lists balance transactions with query q, as account, and requires 200.
func (h *harness) txns(account, q string) btxnList {
	h.t.Helper()
	var l btxnList
	resp := h.stripeCall(http.MethodGet, "/v1/balance_transactions?"+q, nil, account, "", &l)
	require.Equal(h.t, http.StatusOK, resp.StatusCode, q)
	require.Equal(h.t, "list", l.Object)
	require.Equal(h.t, "/v1/balance_transactions", l.URL)
	return l
}

func ids(l btxnList) []string {
	out := []string{}
	for _, bt := range l.Data {
		out = append(out, bt.ID)
	}
	return out
}

// Stripe's fee is its standard US card pricing, 2.9% + 30, rounded to the
// nearest cent with a half rounded up; the charge names its balance
// transaction, which holds the fee, and the platform's balance grows by
// the net. The customer's payment (what Aegis credits) stays the full
// amount.
func TestStripeChargeFeesAreStandardPricingAndTheBalanceGrowsByNet(t *testing.T) {
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{StripeWebhookURL: rcv.URL, StripeWebhookSecret: stripeWhSecret,
		Balances: map[string]int64{"usd": 0}}, withRun())
	charges := charge.Client{B: h.payouts.B, Key: stripeKey}
	txns := balancetransaction.Client{B: h.payouts.B, Key: stripeKey}

	cases := []struct{ amount, fee int64 }{
		{1, 30},        // 0.029 rounds to 0
		{17, 30},       // 0.493 rounds down
		{18, 31},       // 0.522 rounds up
		{499, 44},      // 14.471
		{500, 45},      // 14.5: a half rounds up (not to even)
		{1500, 74},     // 43.5
		{1000, 59},     // 29 exactly
		{10000, 320},   // $100: $3.20
		{123456, 3610}, // 3580.224
		{9_000_000_000_000_000_000, 261_000_000_000_000_030}, // no overflow
	}
	var net int64
	for _, c := range cases {
		p := h.pay("stripe", c.amount, "usd")
		require.Equal(t, c.fee, p.Fee, "fee on %d", c.amount)
		net += c.amount - c.fee
		require.Equal(t, net, h.available("", "usd"), "the balance grows by the net of each payment")

		var ev struct {
			Type string `json:"type"`
			Data struct {
				Object struct {
					Amount         int64  `json:"amount"`
					AmountReceived int64  `json:"amount_received"`
					LatestCharge   string `json:"latest_charge"`
				} `json:"object"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(waitFor(t, ch).body, &ev))
		require.Equal(t, "payment_intent.succeeded", ev.Type)
		require.Equal(t, c.amount, ev.Data.Object.Amount, "the payment's webhook carries the full amount")
		require.Equal(t, c.amount, ev.Data.Object.AmountReceived)
		require.Equal(t, p.Charge, ev.Data.Object.LatestCharge)

		chg, err := charges.Get(p.Charge, nil)
		require.NoError(t, err)
		require.Equal(t, p.ID, chg.PaymentIntent.ID)
		require.Equal(t, c.amount, chg.Amount)
		require.NotNil(t, chg.BalanceTransaction)
		bt, err := txns.Get(chg.BalanceTransaction.ID, nil)
		require.NoError(t, err, "the charge's balance_transaction resolves")
		require.Equal(t, stripe.BalanceTransactionTypeCharge, bt.Type)
		require.Equal(t, "charge", string(bt.ReportingCategory))
		require.Equal(t, c.amount, bt.Amount)
		require.Equal(t, c.fee, bt.Fee)
		require.Equal(t, c.amount-c.fee, bt.Net)
		require.Equal(t, stripe.CurrencyUSD, bt.Currency)
		require.Equal(t, p.Charge, bt.Source.ID)
		require.Equal(t, stripe.BalanceTransactionStatusAvailable, bt.Status)
		require.Equal(t, bt.Created, bt.AvailableOn)
		require.Len(t, bt.FeeDetails, 1)
		require.Equal(t, stripe.BalanceTransactionFeeDetail{Amount: c.fee, Currency: stripe.CurrencyUSD,
			Description: "Stripe processing fees", Type: "stripe_fee"}, *bt.FeeDetails[0])
	}

	// The charge's raw JSON names the transaction by id, unexpanded.
	p := h.pay("stripe", 2000, "usd")
	waitFor(t, ch)
	var raw map[string]any
	h.stripeCall(http.MethodGet, "/v1/charges/"+p.Charge, nil, "", "", &raw)
	require.Equal(t, "charge", raw["object"])
	require.IsType(t, "", raw["balance_transaction"])
	require.Regexp(t, `^txn_`, raw["balance_transaction"])

	// A connected account has no charges; an unknown one is 404.
	resp := h.stripeCall(http.MethodGet, "/v1/charges/"+p.Charge, nil, "acct_fees", "", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp = h.stripeCall(http.MethodGet, "/v1/charges/ch_nope", nil, "", "", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp = h.stripeCall(http.MethodGet, "/v1/balance_transactions/txn_nope", nil, "", "", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp = h.stripeCall(http.MethodGet, "/v1/balance_transactions/"+raw["balance_transaction"].(string), nil, "acct_fees", "", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "a connected account sees its own transactions only")
}

func TestStripeCardFeeIsConfigurable(t *testing.T) {
	h := newHarness(t, psp.Config{StripeCardFee: &psp.FeeRate{BasisPoints: 150, Fixed: 5}})
	require.EqualValues(t, 155, h.pay("stripe", 10000, "eur").Fee)
	require.EqualValues(t, 5, h.pay("stripe", 33, "eur").Fee, "0.495 rounds down")

	_, err := psp.New(psp.Config{StripeCardFee: &psp.FeeRate{BasisPoints: -1}}, nil)
	require.Error(t, err)
	_, err = psp.New(psp.Config{StripeCardFee: &psp.FeeRate{Fixed: -1}}, nil)
	require.Error(t, err)
}

// Refunds take their amount from the balance (Stripe keeps its fee); a
// refund that fails gives it back through an adjustment. The refund's
// events name both transactions.
func TestStripeRefundsPostBalanceTransactions(t *testing.T) {
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{StripeWebhookURL: rcv.URL, StripeWebhookSecret: stripeWhSecret,
		Balances: map[string]int64{"usd": 0}}, withRun())
	p := h.pay("stripe", 10000, "usd") // fee 320
	waitFor(t, ch)

	var ok, failed psp.ReturnRecord
	h.do(http.MethodPost, "/_psp/payments/"+p.ID+"/refunds", `{"amount":3000}`, nil, &ok)
	h.do(http.MethodPost, "/_psp/payments/"+p.ID+"/refunds", `{"amount":1000,"outcome":"failed"}`, nil, &failed)
	require.EqualValues(t, 10000-320-3000, h.available("", "usd"), "the failed refund's amount came back")

	type refundEvent struct {
		Type string `json:"type"`
		Data struct {
			Object struct {
				ID                        string  `json:"id"`
				Status                    string  `json:"status"`
				BalanceTransaction        string  `json:"balance_transaction"`
				FailureBalanceTransaction *string `json:"failure_balance_transaction"`
			} `json:"object"`
		} `json:"data"`
	}
	byType := map[string][]refundEvent{}
	for range 3 {
		var ev refundEvent
		require.NoError(t, json.Unmarshal(waitFor(t, ch).body, &ev))
		byType[ev.Type] = append(byType[ev.Type], ev)
	}
	require.Len(t, byType["refund.created"], 2)
	require.Len(t, byType["refund.updated"], 1)
	get := func(id string) btxn {
		var bt btxn
		resp := h.stripeCall(http.MethodGet, "/v1/balance_transactions/"+id, nil, "", "", &bt)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return bt
	}
	for _, ev := range byType["refund.created"] {
		o := ev.Data.Object
		require.Equal(t, "succeeded", o.Status)
		require.Nil(t, o.FailureBalanceTransaction)
		bt := get(o.BalanceTransaction)
		require.Equal(t, "refund", bt.Type)
		require.Equal(t, "refund", bt.ReportingCategory)
		require.Equal(t, o.ID, bt.Source)
		require.Zero(t, bt.Fee, "Stripe keeps its fee on a refund")
		require.Empty(t, bt.FeeDetails)
		require.Equal(t, bt.Amount, bt.Net)
		if o.ID == ok.ID {
			require.EqualValues(t, -3000, bt.Amount)
		} else {
			require.EqualValues(t, -1000, bt.Amount)
		}
	}
	upd := byType["refund.updated"][0].Data.Object
	require.Equal(t, failed.ID, upd.ID)
	require.Equal(t, "failed", upd.Status)
	require.NotNil(t, upd.FailureBalanceTransaction)
	back := get(*upd.FailureBalanceTransaction)
	require.Equal(t, "adjustment", back.Type)
	require.Equal(t, "refund_failure", back.ReportingCategory)
	require.EqualValues(t, 1000, back.Amount)
	require.Equal(t, failed.ID, back.Source)

	// The charge shows what was refunded, with the refunds' transactions.
	var chg struct {
		AmountRefunded int64 `json:"amount_refunded"`
		Refunded       bool  `json:"refunded"`
		Refunds        struct {
			Data []struct {
				ID                 string `json:"id"`
				BalanceTransaction string `json:"balance_transaction"`
			} `json:"data"`
		} `json:"refunds"`
	}
	h.stripeCall(http.MethodGet, "/v1/charges/"+p.Charge, nil, "", "", &chg)
	require.EqualValues(t, 3000, chg.AmountRefunded)
	require.False(t, chg.Refunded)
	require.Len(t, chg.Refunds.Data, 2)
	require.Equal(t, failed.ID, chg.Refunds.Data[0].ID, "newest first")
}

// Every movement of a Stripe balance is a balance transaction on it:
// charges, refunds, transfers and reversals (both sides), connected
// payouts and their failure. An account's balance is its starting balance
// plus the net of its transactions; platform payouts move no balance and
// post none.
func TestStripeBalanceTransactionsAccountForEveryMovement(t *testing.T) {
	h := newHarness(t, psp.Config{Balances: map[string]int64{"usd": 1_000_000}})
	h.pay("stripe", 10000, "usd")
	tr := h.transferTo("acct_ledger", 4000)
	var rv stripe.TransferReversal
	h.stripeCall(http.MethodPost, "/v1/transfers/"+tr.ID+"/reversals", url.Values{"amount": {"500"}}, "", "", &rv)
	var paid, failing stripe.Payout
	h.stripeCall(http.MethodPost, "/v1/payouts", payoutForm(1000, "usd", "ba_ok"), "acct_ledger", "", &paid)
	h.stripeCall(http.MethodPost, "/v1/payouts", payoutForm(700, "usd", "ba_fail_1"), "acct_ledger", "", &failing)
	h.settle(paid.ID, `{"outcome":"paid"}`)
	h.settle(failing.ID, "")
	var platformPayout stripe.Payout
	h.stripeCall(http.MethodPost, "/v1/payouts", payoutForm(900, "usd", "ba_ok"), "", "", &platformPayout)

	sum := func(l btxnList) (n int64) {
		for _, bt := range l.Data {
			require.Equal(t, bt.Amount-bt.Fee, bt.Net)
			n += bt.Net
		}
		return n
	}
	platform := h.txns("", "limit=100")
	require.Equal(t, int64(1_000_000)+sum(platform), h.available("", "usd"))
	connected := h.txns("acct_ledger", "limit=100")
	require.Equal(t, sum(connected), h.available("acct_ledger", "usd"))
	require.EqualValues(t, 4000-500-1000, h.available("acct_ledger", "usd"))

	kinds := func(l btxnList) []string {
		var out []string
		for _, bt := range l.Data {
			out = append(out, fmt.Sprintf("%s/%s %d %s", bt.Type, bt.ReportingCategory, bt.Amount, bt.Source))
		}
		return out
	}
	require.Equal(t, []string{
		"transfer_refund/transfer_reversal 500 " + rv.ID,
		"transfer/transfer -4000 " + tr.ID,
		"charge/charge 10000 " + platform.Data[2].Source,
	}, kinds(platform), "newest first; the platform payout posted none")
	require.Equal(t, []string{
		"payout_failure/payout_reversal 700 " + failing.ID,
		"payout/payout -700 " + failing.ID,
		"payout/payout -1000 " + paid.ID,
		"payment_refund/refund -500 " + rv.DestinationPaymentRefund.ID,
		"payment/charge 4000 " + tr.DestinationPayment.ID,
	}, kinds(connected))

	// The objects' balance_transaction ids resolve where money moved.
	require.Equal(t, tr.BalanceTransaction.ID, platform.Data[1].ID)
	require.Equal(t, rv.BalanceTransaction.ID, platform.Data[0].ID)
	require.Equal(t, paid.BalanceTransaction.ID, connected.Data[2].ID)
	var failed stripe.Payout
	h.stripeCall(http.MethodGet, "/v1/payouts/"+failing.ID, nil, "acct_ledger", "", &failed)
	require.Equal(t, failed.FailureBalanceTransaction.ID, connected.Data[0].ID)
	resp := h.stripeCall(http.MethodGet, "/v1/balance_transactions/"+platformPayout.BalanceTransaction.ID, nil, "", "", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "a platform payout moves no balance")
}

// GET /v1/balance_transactions pages and filters as Stripe's list does, and
// stripe-go's iterator pages through it.
func TestStripeBalanceTransactionListFilters(t *testing.T) {
	h := newHarness(t, psp.Config{})
	usd1 := h.pay("stripe", 1000, "usd")
	eur := h.pay("stripe", 2000, "eur")
	usd2 := h.pay("stripe", 3000, "usd")
	var refund psp.ReturnRecord
	h.do(http.MethodPost, "/_psp/payments/"+usd2.ID+"/refunds", `{"amount":100}`, nil, &refund)
	tr := h.transferTo("acct_list", 500)

	all := h.txns("", "")
	require.Len(t, all.Data, 5)
	require.False(t, all.HasMore)
	require.Equal(t, []string{"transfer", "refund", "charge", "charge", "charge"}, func() []string {
		var out []string
		for _, bt := range all.Data {
			out = append(out, bt.Type)
		}
		return out
	}())
	require.Equal(t, usd1.Charge, all.Data[4].Source, "newest first")

	page := h.txns("", "limit=2")
	require.Equal(t, ids(all)[:2], ids(page))
	require.True(t, page.HasMore)
	page = h.txns("", "limit=2&starting_after="+all.Data[1].ID)
	require.Equal(t, ids(all)[2:4], ids(page))
	require.True(t, page.HasMore)
	page = h.txns("", "limit=2&ending_before="+all.Data[4].ID)
	require.Equal(t, ids(all)[2:4], ids(page))
	require.True(t, page.HasMore)
	page = h.txns("", "ending_before="+all.Data[1].ID)
	require.Equal(t, ids(all)[:1], ids(page))
	require.False(t, page.HasMore)

	require.Equal(t, []string{all.Data[2].ID, all.Data[4].ID}, ids(h.txns("", "type=charge&currency=usd")))
	require.Equal(t, []string{all.Data[3].ID}, ids(h.txns("", "currency=EUR")))
	require.Equal(t, eur.Charge, h.txns("", "currency=eur").Data[0].Source)
	require.Equal(t, []string{all.Data[1].ID}, ids(h.txns("", "source="+refund.ID)))
	require.Equal(t, []string{all.Data[0].ID}, ids(h.txns("", "source="+tr.ID)))
	require.Equal(t, []string{all.Data[2].ID}, ids(h.txns("", "type=charge&limit=1&starting_after="+all.Data[0].ID)),
		"the cursor need not match the filters")
	created := all.Data[0].Created
	require.Len(t, h.txns("", "created[lte]="+strconv.FormatInt(created, 10)).Data, 5)
	require.Len(t, h.txns("", "created[gt]="+strconv.FormatInt(created, 10)).Data, 0)
	require.Len(t, h.txns("", "created[gte]="+strconv.FormatInt(created-3600, 10)+"&type=refund").Data, 1)
	require.Len(t, h.txns("", "created="+strconv.FormatInt(created+3600, 10)).Data, 0)
	require.Len(t, h.txns("", "type=payout").Data, 0)

	connected := h.txns("acct_list", "")
	require.Len(t, connected.Data, 1, "the transfer's arrival, on the connected account")
	require.Equal(t, "payment", connected.Data[0].Type)
	require.Equal(t, tr.DestinationPayment.ID, connected.Data[0].Source)

	// stripe-go pages through it, one at a time.
	client := balancetransaction.Client{B: h.payouts.B, Key: stripeKey}
	params := &stripe.BalanceTransactionListParams{Currency: stripe.String("usd")}
	params.Limit = stripe.Int64(1)
	it := client.List(params)
	var got []string
	for it.Next() {
		got = append(got, it.BalanceTransaction().ID)
	}
	require.NoError(t, it.Err())
	require.Equal(t, []string{all.Data[0].ID, all.Data[1].ID, all.Data[2].ID, all.Data[4].ID}, got)

	// Refused as Stripe refuses them.
	var po stripe.Payout
	h.stripeCall(http.MethodPost, "/v1/payouts", payoutForm(100, "usd", "ba_ok"), "", "", &po)
	for q, param := range map[string]string{
		"foo=1":                            "foo",
		"limit=0":                          "limit",
		"limit=101":                        "limit",
		"type=nope":                        "type",
		"currency=dollars":                 "currency",
		"created[gte]=soon":                "created[gte]",
		"starting_after=txn_nope":          "starting_after",
		"ending_before=txn_nope":           "ending_before",
		"payout=po_nope":                   "payout",
		"payout=" + po.ID:                  "payout", // manual payouts cannot be filtered on
		"starting_after=a&ending_before=b": "ending_before",
	} {
		var e stripeErrBody
		resp := h.stripeCall(http.MethodGet, "/v1/balance_transactions?"+q, nil, "", "", &e)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
		require.Equal(t, "invalid_request_error", e.Error.Type, q)
		require.Equal(t, param, e.Error.Param, q)
	}
	resp := h.stripeCall(http.MethodGet, "/v1/balance_transactions/"+all.Data[0].ID+"?foo=1", nil, "", "", nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp = h.do(http.MethodGet, "/v1/balance_transactions", nil, nil, nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// paystackTxn is a Paystack transaction as the webhook and the lists carry
// it.
type paystackTxn struct {
	ID        int64  `json:"id"`
	Reference string `json:"reference"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Fees      *int64 `json:"fees"`
}

// Paystack's fees: Nigerian local cards 1.5% + ₦100 (the ₦100 waived below
// ₦2,500), capped at ₦2,000; other currencies at their own rate. They are
// in the transaction's fees (kobo), in the webhook and in the lists, and
// the integration's balance grows by amount - fees.
func TestPaystackFeesInTheWebhookTheListsAndTheBalance(t *testing.T) {
	const secret = "sk_test_paystack_webhook"
	rcv, ch, _ := receiver(t, nil)
	h := newHarness(t, psp.Config{PaystackWebhookURL: rcv.URL, PaystackSecretKey: secret,
		Balances: map[string]int64{"ngn": 0, "usd": 0, "ghs": 0, "kes": 0, "zar": 0, "eur": 0}}, withRun())

	cases := []struct {
		amount   int64
		currency string
		fees     int64
	}{
		{10_000, "NGN", 150},         // ₦100: 1.5%, no ₦100
		{1, "NGN", 0},                // 0.015 kobo
		{100, "NGN", 2},              // 1.5 kobo: a half rounds up
		{249_999, "NGN", 3_750},      // ₦2,499.99: the ₦100 still waived
		{250_000, "NGN", 13_750},     // ₦2,500: 1.5% + ₦100
		{500_000, "NGN", 17_500},     // ₦5,000: ₦175
		{12_666_600, "NGN", 199_999}, // ₦126,666: just under the cap
		{12_666_700, "NGN", 200_000}, // ₦126,667: capped at ₦2,000
		{20_000_000, "NGN", 200_000}, // ₦200,000: capped
		{10_000, "USD", 390},         // 3.9%
		{10_000, "GHS", 195},         // 1.95%
		{10_000, "KES", 290},         // 2.9%
		{10_000, "ZAR", 390},         // 2.9% + R1
		{10_000, "EUR", 390},         // any other: 3.9%
	}
	nets := map[string]int64{}
	for _, c := range cases {
		p := h.pay("paystack", c.amount, c.currency)
		require.Equal(t, c.fees, p.Fee, "%d %s", c.amount, c.currency)
		nets[c.currency] += c.amount - c.fees
		require.Equal(t, nets[c.currency], h.paystackBalance(c.currency), "the balance grows by amount - fees")

		var ev struct {
			Event string      `json:"event"`
			Data  paystackTxn `json:"data"`
		}
		require.NoError(t, json.Unmarshal(waitFor(t, ch).body, &ev))
		require.Equal(t, "charge.success", ev.Event)
		require.Equal(t, p.ID, ev.Data.Reference)
		require.Equal(t, c.amount, ev.Data.Amount, "the customer paid the full amount")
		require.NotNil(t, ev.Data.Fees)
		require.Equal(t, c.fees, *ev.Data.Fees)

		var verify struct {
			Status bool        `json:"status"`
			Data   paystackTxn `json:"data"`
		}
		resp := h.do(http.MethodGet, "/transaction/verify/"+p.ID, nil, paystackHeader(), &verify)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NotNil(t, verify.Data.Fees)
		require.Equal(t, c.fees, *verify.Data.Fees)
	}

	var list struct {
		Data []paystackTxn `json:"data"`
	}
	resp := h.do(http.MethodGet, "/transaction?perPage=100", nil, paystackHeader(), &list)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, list.Data, len(cases))
	for i, c := range cases {
		got := list.Data[len(cases)-1-i] // newest first
		require.Equal(t, c.amount, got.Amount)
		require.NotNil(t, got.Fees)
		require.Equal(t, c.fees, *got.Fees, "%d %s", c.amount, c.currency)
	}

	// A processed refund leaves the balance; a failed one does not.
	p := h.pay("paystack", 500_000, "NGN")
	waitFor(t, ch)
	before := h.paystackBalance("NGN")
	h.do(http.MethodPost, "/_psp/payments/"+p.ID+"/refunds", `{"amount":100000}`, nil, nil)
	h.do(http.MethodPost, "/_psp/payments/"+p.ID+"/refunds", `{"amount":50000,"outcome":"failed"}`, nil, nil)
	require.Equal(t, before-100_000, h.paystackBalance("NGN"))
}

// expand[]=data.source (or stripe-go's expand[0]=…) renders a charge's
// source as the charge, with the metadata that names whose payment it was;
// other sources stay ids.
func TestStripeBalanceTransactionsExpandTheirChargeSource(t *testing.T) {
	h := newHarness(t, psp.Config{})
	paid := h.pay("stripe", 1000, "usd")
	h.transferTo("acct_expand", 500)
	for _, expand := range []string{"expand[]=data.source", "expand[0]=data.source"} {
		var list struct {
			Data []struct {
				Type   string          `json:"type"`
				Source json.RawMessage `json:"source"`
			} `json:"data"`
		}
		resp := h.stripeCall(http.MethodGet, "/v1/balance_transactions?"+expand, nil, "", "", &list)
		require.Equal(t, http.StatusOK, resp.StatusCode, expand)
		require.Len(t, list.Data, 2, expand)
		var charge struct {
			ID       string            `json:"id"`
			Object   string            `json:"object"`
			Metadata map[string]string `json:"metadata"`
		}
		require.Equal(t, "charge", list.Data[1].Type)
		require.NoError(t, json.Unmarshal(list.Data[1].Source, &charge), expand)
		require.Equal(t, paid.Charge, charge.ID)
		require.Equal(t, "charge", charge.Object)
		require.NotEmpty(t, charge.Metadata["user_id"])
		var transferSource string
		require.NoError(t, json.Unmarshal(list.Data[0].Source, &transferSource), "a transfer's source stays its id")
	}
}
