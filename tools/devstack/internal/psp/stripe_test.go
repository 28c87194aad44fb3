package psp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

func TestStripePayoutCreateShape(t *testing.T) {
	h := newHarness(t, psp.Config{})
	p, err := h.payouts.New(payoutParams("key-shape", "pay_1", 1250))
	require.NoError(t, err)

	require.Regexp(t, `^po_[0-9A-Za-z]{24}$`, p.ID)
	require.Equal(t, int64(1250), p.Amount)
	require.Equal(t, stripe.CurrencyUSD, p.Currency, "currency is lowercased")
	require.Equal(t, stripe.PayoutStatusPending, p.Status)
	require.Equal(t, stripe.PayoutMethodStandard, p.Method)
	require.Equal(t, stripe.PayoutTypeBank, p.Type)
	require.Equal(t, "ba_123", p.Destination.ID)
	require.Equal(t, "pay_1", p.Metadata["payout_id"])
	require.NotNil(t, p.BalanceTransaction)
	require.Regexp(t, `^txn_`, p.BalanceTransaction.ID)
	require.False(t, p.Livemode)
	require.NotZero(t, p.Created)
	require.Greater(t, p.ArrivalDate, p.Created)
	require.Empty(t, p.FailureCode)
	require.Empty(t, p.LastResponse.Header.Get("Idempotent-Replayed"))
	require.NotEmpty(t, p.LastResponse.RequestID)

	got, err := h.payouts.Get(p.ID, nil)
	require.NoError(t, err)
	require.Equal(t, p.ID, got.ID)
	require.Equal(t, "pay_1", got.Metadata["payout_id"])

	objs := h.objects()
	require.Len(t, objs, 1)
	require.Equal(t, psp.ObjectRecord{
		Provider:       psp.ProviderStripe,
		Kind:           psp.KindPayout,
		ID:             p.ID,
		IdempotencyKey: "key-shape",
		PayoutID:       "pay_1",
		Amount:         1250,
		Currency:       "usd",
		Destination:    "ba_123",
		Status:         "pending",
		CreatedAt:      objs[0].CreatedAt,
	}, objs[0])

	calls := h.calls()
	require.Equal(t, []string{psp.OutcomeCreated, psp.OutcomeOK}, outcomes(calls))
	require.Equal(t, "key-shape", calls[0].IdempotencyKey)
	require.Equal(t, "pay_1", calls[0].PayoutID)
	require.Equal(t, p.ID, calls[0].ObjectID)
	require.Equal(t, http.MethodPost, calls[0].Method)
	require.Equal(t, "/v1/payouts", calls[0].Path)
	require.Equal(t, http.StatusOK, calls[0].Status)
	require.Equal(t, "pay_1", calls[1].PayoutID, "GET learns the payout id from the object")
}

func TestStripeSameKeyReplaysSamePayout(t *testing.T) {
	h := newHarness(t, psp.Config{})
	first, err := h.payouts.New(payoutParams("key-1", "pay_1", 500))
	require.NoError(t, err)
	second, err := h.payouts.New(payoutParams("key-1", "pay_1", 500))
	require.NoError(t, err)

	require.Equal(t, first.ID, second.ID)
	require.Equal(t, "true", second.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, first.LastResponse.RequestID, second.LastResponse.Header.Get("Original-Request"))
	require.Equal(t, first.LastResponse.RawJSON, second.LastResponse.RawJSON, "replay is byte-identical")
	require.Len(t, h.objects(), 1)
	require.Equal(t, []string{psp.OutcomeCreated, psp.OutcomeReplayed}, outcomes(h.calls()))
}

func TestStripeSameKeyDifferentParamsIsIdempotencyError(t *testing.T) {
	h := newHarness(t, psp.Config{})
	_, err := h.payouts.New(payoutParams("key-1", "pay_1", 500))
	require.NoError(t, err)

	_, err = h.payouts.New(payoutParams("key-1", "pay_1", 501))
	se := stripeErr(t, err)
	require.Equal(t, stripe.ErrorTypeIdempotency, se.Type)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Contains(t, se.Msg, "same parameters")
	var ie *stripe.IdempotencyError
	require.ErrorAs(t, err, &ie)

	// The same key on another endpoint is also a mismatch.
	tp := &stripe.TransferParams{Amount: stripe.Int64(500), Currency: stripe.String("usd"), Destination: stripe.String("acct_1")}
	tp.SetIdempotencyKey("key-1")
	_, err = h.transfer.New(tp)
	require.Equal(t, stripe.ErrorTypeIdempotency, stripeErr(t, err).Type)

	require.Len(t, h.objects(), 1)
	require.Equal(t, []string{psp.OutcomeCreated, psp.OutcomeConflict, psp.OutcomeConflict}, outcomes(h.calls()))
}

func TestStripeKeysAreScopedPerAPIKey(t *testing.T) {
	h := newHarness(t, psp.Config{})
	_, err := h.payouts.New(payoutParams("shared-key", "pay_1", 500))
	require.NoError(t, err)
	other := h.payouts
	other.Key = "sk_test_other_account"
	_, err = other.New(payoutParams("shared-key", "pay_1", 500))
	require.NoError(t, err)
	require.Len(t, h.objects(), 2)
}

func TestStripeRequestsWithoutKeyExecuteEachTime(t *testing.T) {
	h := newHarness(t, psp.Config{})
	hdr := http.Header{"Authorization": {"Bearer " + stripeKey}, "Content-Type": {"application/x-www-form-urlencoded"}}
	form := url.Values{"amount": {"100"}, "currency": {"usd"}, "metadata[payout_id]": {"pay_nokey"}}.Encode()
	for range 2 {
		resp := h.do(http.MethodPost, "/v1/payouts", form, hdr, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	require.Len(t, h.objects(), 2)
}

// Stripe saves the answer of a request that began executing under an
// Idempotency-Key, 500s included, and replays it for every retry with that
// key: only a new key (after the caller made sure nothing was created) gets
// the payout made.
func TestStripe5xxIsSavedAndReplayedPerKey(t *testing.T) {
	h := newHarness(t, psp.Config{})
	h.putFaults(`{"provider":"stripe","error_status":500,"next":[{"kind":"5xx","count":1}]}`)

	_, err := h.payouts.New(payoutParams("key-5xx", "pay_5xx", 700))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusInternalServerError, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeAPI, se.Type)
	require.Empty(t, h.objects())

	_, err = h.payouts.New(payoutParams("key-5xx", "pay_5xx", 700))
	se = stripeErr(t, err)
	require.Equal(t, http.StatusInternalServerError, se.HTTPStatusCode, "the saved 500 is replayed")
	require.Equal(t, "true", se.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Empty(t, h.objects())

	p, err := h.payouts.New(payoutParams("key-5xx-2", "pay_5xx", 700))
	require.NoError(t, err, "a new key executes")
	objs := h.objects()
	require.Len(t, objs, 1)
	require.Equal(t, p.ID, objs[0].ID)
	require.Equal(t, []string{psp.OutcomeFault5xx, psp.OutcomeReplayed, psp.OutcomeCreated}, outcomes(h.calls()))
}

// Keys are forgotten after the idempotency window: a request with an old
// key executes anew.
func TestStripeKeysArePrunedAfterTheWindow(t *testing.T) {
	h := newHarness(t, psp.Config{IdempotencyWindow: 50 * time.Millisecond})
	p1, err := h.payouts.New(payoutParams("key-prune", "pay_prune", 700))
	require.NoError(t, err)
	p2, err := h.payouts.New(payoutParams("key-prune", "pay_prune", 700))
	require.NoError(t, err)
	require.Equal(t, p1.ID, p2.ID, "within the window: replayed")
	// Replayed while the key is remembered; once the window has passed the
	// same request executes anew.
	var p3 *stripe.Payout
	eventually(t, "the key to be forgotten", func() bool {
		p, err := h.payouts.New(payoutParams("key-prune", "pay_prune", 700))
		if err != nil {
			return false
		}
		p3 = p
		return p.ID != p1.ID
	})
	require.NotEqual(t, p1.ID, p3.ID, "after the window the key is forgotten")
	require.Len(t, h.objects(), 2)
}

// The lookups the worker makes: list payouts (matched on metadata by the
// caller) and transfers by transfer_group, newest first, paginated.
func TestStripeListsPayoutsAndTransfers(t *testing.T) {
	h := newHarness(t, psp.Config{})
	var ids []string
	for i := range 3 {
		p, err := h.payouts.New(payoutParams(fmt.Sprintf("key-list-%d", i), fmt.Sprintf("pay_list_%d", i), 100))
		require.NoError(t, err)
		ids = append(ids, p.ID)
	}
	params := &stripe.PayoutListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: time.Now().Add(-time.Minute).Unix()}}
	params.Limit = stripe.Int64(2)
	var got []string
	it := h.payouts.List(params)
	for it.Next() {
		got = append(got, it.Payout().ID)
		require.Equal(t, "pay_list_"+fmt.Sprint(2-len(got)+1), it.Payout().Metadata["payout_id"])
	}
	require.NoError(t, it.Err())
	require.Equal(t, []string{ids[2], ids[1], ids[0]}, got)

	params = &stripe.PayoutListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: time.Now().Add(time.Hour).Unix()}}
	it = h.payouts.List(params)
	require.False(t, it.Next(), "nothing created after the bound")
	require.NoError(t, it.Err())

	tp := &stripe.TransferParams{Amount: stripe.Int64(100), Currency: stripe.String("usd"), Destination: stripe.String("acct_1"),
		TransferGroup: stripe.String("pay_tr_1")}
	tp.AddMetadata("payout_id", "pay_tr_1")
	tr, err := h.transfer.New(tp)
	require.NoError(t, err)
	tl := &stripe.TransferListParams{TransferGroup: stripe.String("pay_tr_1")}
	tit := h.transfer.List(tl)
	require.True(t, tit.Next())
	require.Equal(t, tr.ID, tit.Transfer().ID)
	require.False(t, tit.Next())
	tit = h.transfer.List(&stripe.TransferListParams{TransferGroup: stripe.String("pay_tr_none")})
	require.False(t, tit.Next())
	require.NoError(t, tit.Err())
}

func TestStripe429CarriesRetryAfter(t *testing.T) {
	h := newHarness(t, psp.Config{})
	h.putFaults(`{"retry_after_seconds":7,"next":[{"kind":"429"}]}`)

	_, err := h.payouts.New(payoutParams("key-429", "pay_429", 700))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusTooManyRequests, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorType("rate_limit_error"), se.Type)
	require.Equal(t, stripe.ErrorCodeRateLimit, se.Code)
	require.NotNil(t, se.LastResponse)
	require.Equal(t, "7", se.LastResponse.Header.Get("Retry-After"))

	_, err = h.payouts.New(payoutParams("key-429", "pay_429", 700))
	require.NoError(t, err)
	require.Len(t, h.objects(), 1)
	require.Equal(t, []string{psp.OutcomeFault429, psp.OutcomeCreated}, outcomes(h.calls()))
}

func TestStripeInvalidAccount(t *testing.T) {
	h := newHarness(t, psp.Config{})
	params := payoutParams("key-inv", "pay_inv", 700)
	params.Destination = stripe.String("ba_invalid_123")
	_, err := h.payouts.New(params)
	se := stripeErr(t, err)
	require.Equal(t, stripe.ErrorCodeAccountInvalid, se.Code)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type)
	require.Equal(t, "destination", se.Param)

	// Business rejections executed, so they are stored and replayed.
	params = payoutParams("key-inv", "pay_inv", 700)
	params.Destination = stripe.String("ba_invalid_123")
	_, err = h.payouts.New(params)
	se = stripeErr(t, err)
	require.Equal(t, stripe.ErrorCodeAccountInvalid, se.Code)
	require.Equal(t, "true", se.LastResponse.Header.Get("Idempotent-Replayed"))

	// The fault form of it, on a transfer.
	h.putFaults(`{"next":[{"kind":"invalid_account"}]}`)
	tp := &stripe.TransferParams{Amount: stripe.Int64(10), Currency: stripe.String("usd"), Destination: stripe.String("acct_ok")}
	_, err = h.transfer.New(tp)
	se = stripeErr(t, err)
	require.Equal(t, stripe.ErrorCodeAccountInvalid, se.Code)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)

	require.Empty(t, h.objects())
	require.Equal(t, []string{psp.OutcomeRejected, psp.OutcomeReplayed, psp.OutcomeRejected}, outcomes(h.calls()))
}

func TestStripeInsufficientFunds(t *testing.T) {
	h := newHarness(t, psp.Config{})
	h.putFaults(`{"provider":"stripe","next":[{"kind":"insufficient_funds"}]}`)
	_, err := h.payouts.New(payoutParams("key-nsf", "pay_nsf", 700))
	se := stripeErr(t, err)
	require.Equal(t, stripe.ErrorCodeBalanceInsufficient, se.Code)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)

	_, err = h.payouts.New(payoutParams("key-nsf", "pay_nsf", 700))
	require.Equal(t, stripe.ErrorCodeBalanceInsufficient, stripeErr(t, err).Code, "stored under the key")
	_, err = h.payouts.New(payoutParams("key-nsf-2", "pay_nsf", 700))
	require.NoError(t, err, "the queued fault was used up")
	require.Len(t, h.objects(), 1)
}

func TestStripeTimeoutAfterCreateThenRetryReplays(t *testing.T) {
	h := newHarness(t, psp.Config{})
	h.putFaults(`{"timeout":"50ms","next":[{"kind":"timeout_after_create"}]}`)

	_, err := h.payouts.New(payoutParams("key-tac", "pay_tac", 900))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusGatewayTimeout, se.HTTPStatusCode)

	objs := h.objects()
	require.Len(t, objs, 1, "the payout was created although the client saw a timeout")

	p, err := h.payouts.New(payoutParams("key-tac", "pay_tac", 900))
	require.NoError(t, err)
	require.Equal(t, objs[0].ID, p.ID)
	require.Equal(t, "true", p.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Len(t, h.objects(), 1)

	calls := h.calls()
	require.Equal(t, []string{psp.OutcomeFaultTimeoutCreate, psp.OutcomeReplayed}, outcomes(calls))
	require.Equal(t, http.StatusGatewayTimeout, calls[0].Status)
	require.Equal(t, p.ID, calls[0].ObjectID)
}

func TestStripeTimeoutBeforeProcessingHonoursClientDeadline(t *testing.T) {
	h := newHarness(t, psp.Config{})
	h.putFaults(`{"timeout":"1m","next":[{"kind":"timeout"}]}`)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	params := payoutParams("key-to", "pay_to", 900)
	params.Context = ctx
	_, err := h.payouts.New(params)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the client's deadline ends the call, not the stand-in's minute")
	require.Empty(t, h.objects(), "nothing executed")

	p, err := h.payouts.New(payoutParams("key-to", "pay_to", 900))
	require.NoError(t, err)
	require.Empty(t, p.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Len(t, h.objects(), 1)

	calls := h.calls()
	require.Equal(t, []string{psp.OutcomeFaultTimeout, psp.OutcomeCreated}, outcomes(calls))
}

func TestStripeTimeoutFaultAnswers504(t *testing.T) {
	h := newHarness(t, psp.Config{})
	h.putFaults(`{"timeout":"10ms","next":[{"kind":"timeout"}]}`)
	_, err := h.payouts.New(payoutParams("key-504", "pay_504", 900))
	require.Equal(t, http.StatusGatewayTimeout, stripeErr(t, err).HTTPStatusCode)
	require.Empty(t, h.objects())
}

func TestStripeConcurrentSameKeyCreatesOnePayout(t *testing.T) {
	for _, latency := range []string{"0s", "50ms"} {
		t.Run("latency="+latency, func(t *testing.T) {
			h := newHarness(t, psp.Config{})
			h.putFaults(`{"latency":"` + latency + `"}`)

			const n = 20
			var wg sync.WaitGroup
			ids := make([]string, n)
			errs := make([]error, n)
			for i := range n {
				wg.Go(func() {
					p, err := h.payouts.New(payoutParams("key-race", "pay_race", 4200))
					errs[i] = err
					if err == nil {
						ids[i] = p.ID
					}
				})
			}
			wg.Wait()

			objs := h.objects()
			require.Len(t, objs, 1)
			successes := 0
			for i := range n {
				if errs[i] == nil {
					successes++
					require.Equal(t, objs[0].ID, ids[i])
					continue
				}
				se := stripeErr(t, errs[i])
				require.Equal(t, http.StatusConflict, se.HTTPStatusCode)
				require.Equal(t, stripe.ErrorTypeIdempotency, se.Type)
				require.Equal(t, stripe.ErrorCode("idempotency_key_in_use"), se.Code)
			}
			require.GreaterOrEqual(t, successes, 1)

			created := 0
			for _, c := range h.calls() {
				if c.Outcome == psp.OutcomeCreated {
					created++
				}
			}
			require.Equal(t, 1, created)
		})
	}
}

func TestStripeKeyInUseIs409(t *testing.T) {
	h := newHarness(t, psp.Config{})
	h.putFaults(`{"latency":"300ms"}`)

	type result struct {
		p   *stripe.Payout
		err error
	}
	first := make(chan result, 1)
	go func() {
		p, err := h.payouts.New(payoutParams("key-busy", "pay_busy", 100))
		first <- result{p, err}
	}()
	eventually(t, "first request to hold the key", func() bool {
		calls := h.calls()
		return len(calls) == 1 && calls[0].Outcome == psp.OutcomeExecuting
	})

	_, err := h.payouts.New(payoutParams("key-busy", "pay_busy", 100))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusConflict, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCode("idempotency_key_in_use"), se.Code)

	r := <-first
	require.NoError(t, r.err)
	h.putFaults(`{}`)
	again, err := h.payouts.New(payoutParams("key-busy", "pay_busy", 100))
	require.NoError(t, err)
	require.Equal(t, r.p.ID, again.ID)
	require.Equal(t, []string{psp.OutcomeCreated, psp.OutcomeConflict, psp.OutcomeReplayed}, outcomes(h.calls()))
}

func TestStripeValidationErrorsAreStored(t *testing.T) {
	h := newHarness(t, psp.Config{})
	params := &stripe.PayoutParams{Currency: stripe.String("usd")}
	params.SetIdempotencyKey("key-val")
	_, err := h.payouts.New(params)
	se := stripeErr(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type)
	require.Equal(t, "amount", se.Param)
	require.Equal(t, stripe.ErrorCodeParameterMissing, se.Code)

	_, err = h.payouts.New(params)
	se = stripeErr(t, err)
	require.Equal(t, "amount", se.Param)
	require.Equal(t, "true", se.LastResponse.Header.Get("Idempotent-Replayed"))

	cases := []struct {
		name  string
		p     *stripe.PayoutParams
		param string
	}{
		{"zero amount", &stripe.PayoutParams{Amount: stripe.Int64(0), Currency: stripe.String("usd")}, "amount"},
		{"negative amount", &stripe.PayoutParams{Amount: stripe.Int64(-5), Currency: stripe.String("usd")}, "amount"},
		{"no currency", &stripe.PayoutParams{Amount: stripe.Int64(5)}, "currency"},
		{"bad currency", &stripe.PayoutParams{Amount: stripe.Int64(5), Currency: stripe.String("dollars")}, "currency"},
		{"bad method", &stripe.PayoutParams{Amount: stripe.Int64(5), Currency: stripe.String("usd"), Method: stripe.String("teleport")}, "method"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.payouts.New(tc.p)
			se := stripeErr(t, err)
			require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
			require.Equal(t, tc.param, se.Param)
		})
	}

	unknown := payoutParams("", "pay_x", 5)
	unknown.AddExtra("bogus", "1")
	_, err = h.payouts.New(unknown)
	se = stripeErr(t, err)
	require.Equal(t, stripe.ErrorCode("parameter_unknown"), se.Code)
	require.Equal(t, "bogus", se.Param)

	require.Empty(t, h.objects())
}

func TestStripeAuth(t *testing.T) {
	h := newHarness(t, psp.Config{})
	bad := h.payouts
	bad.Key = "pk_test_publishable"
	_, err := bad.New(payoutParams("k", "p", 1))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusUnauthorized, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type)
	require.Contains(t, se.Msg, "Invalid API Key provided")

	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	resp := h.do(http.MethodGet, "/v1/payouts/po_x", nil, nil, &body)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "invalid_request_error", body.Error.Type)

	rk := h.payouts
	rk.Key = "rk_test_restricted"
	_, err = rk.New(payoutParams("k2", "p", 1))
	require.NoError(t, err, "restricted keys are accepted")

	require.Equal(t, []string{psp.OutcomeUnauthorized, psp.OutcomeUnauthorized, psp.OutcomeCreated}, outcomes(h.calls()))
}

func TestStripeGetUnknownIsResourceMissing(t *testing.T) {
	h := newHarness(t, psp.Config{})
	_, err := h.payouts.Get("po_nope", nil)
	se := stripeErr(t, err)
	require.Equal(t, http.StatusNotFound, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCodeResourceMissing, se.Code)

	_, err = h.transfer.Get("tr_nope", nil)
	require.Equal(t, stripe.ErrorCodeResourceMissing, stripeErr(t, err).Code)

	// A payout id is not a transfer.
	p, err := h.payouts.New(payoutParams("k", "p", 1))
	require.NoError(t, err)
	_, err = h.transfer.Get(p.ID, nil)
	require.Equal(t, stripe.ErrorCodeResourceMissing, stripeErr(t, err).Code)

	resp := h.do(http.MethodGet, "/v1/charges", nil, http.Header{"Authorization": {"Bearer " + stripeKey}}, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "a route the stand-in does not implement")
}

func TestStripeTransfer(t *testing.T) {
	h := newHarness(t, psp.Config{})
	params := &stripe.TransferParams{
		Amount:        stripe.Int64(2500),
		Currency:      stripe.String("EUR"),
		Destination:   stripe.String("acct_1Abc"),
		TransferGroup: stripe.String("grp_1"),
		Description:   stripe.String("split"),
	}
	params.AddMetadata("payout_id", "pay_tr")
	params.SetIdempotencyKey("key-tr")
	tr, err := h.transfer.New(params)
	require.NoError(t, err)
	require.Regexp(t, `^tr_`, tr.ID)
	require.Equal(t, int64(2500), tr.Amount)
	require.Equal(t, stripe.CurrencyEUR, tr.Currency)
	require.Equal(t, "acct_1Abc", tr.Destination.ID)
	require.Equal(t, "grp_1", tr.TransferGroup)
	require.Equal(t, "pay_tr", tr.Metadata["payout_id"])
	require.False(t, tr.Reversed)
	require.False(t, tr.Livemode)

	again, err := h.transfer.New(params)
	require.NoError(t, err)
	require.Equal(t, tr.ID, again.ID)

	got, err := h.transfer.Get(tr.ID, nil)
	require.NoError(t, err)
	require.Equal(t, tr.ID, got.ID)

	objs := h.objects()
	require.Len(t, objs, 1)
	require.Equal(t, psp.KindTransfer, objs[0].Kind)
	require.Equal(t, "pay_tr", objs[0].PayoutID)
	require.Equal(t, "acct_1Abc", objs[0].Destination)

	missing := &stripe.TransferParams{Amount: stripe.Int64(1), Currency: stripe.String("usd")}
	_, err = h.transfer.New(missing)
	se := stripeErr(t, err)
	require.Equal(t, "destination", se.Param)
	require.Equal(t, stripe.ErrorCodeParameterMissing, se.Code)
}

// ba_lost_*: the first create for a payout executes and its answer is
// lost; later ones answer normally (a new key creates nothing new for
// ba_lost_invalid*, which is refused).
func TestStripeLostAnswerDestinations(t *testing.T) {
	h := newHarness(t, psp.Config{})
	h.putFaults(`{"provider":"stripe","timeout":"100ms"}`)
	p := payoutParams("key-lost-1", "pay_lost_ok", 700)
	p.Destination = stripe.String("ba_lost_ok_1")
	_, err := h.payouts.New(p)
	se := stripeErr(t, err)
	require.Equal(t, http.StatusGatewayTimeout, se.HTTPStatusCode)
	objs := h.objects()
	require.Len(t, objs, 1, "it executed")
	p = payoutParams("key-lost-1", "pay_lost_ok", 700)
	p.Destination = stripe.String("ba_lost_ok_1")
	got, err := h.payouts.New(p)
	require.NoError(t, err, "a retry with the key replays the created payout")
	require.Equal(t, objs[0].ID, got.ID)

	p = payoutParams("key-lost-2", "pay_lost_invalid", 700)
	p.Destination = stripe.String("ba_lost_invalid_1")
	_, err = h.payouts.New(p)
	require.Equal(t, http.StatusGatewayTimeout, stripeErr(t, err).HTTPStatusCode)
	p = payoutParams("key-lost-3", "pay_lost_invalid", 700)
	p.Destination = stripe.String("ba_lost_invalid_1")
	_, err = h.payouts.New(p)
	require.Equal(t, stripe.ErrorCode("account_invalid"), stripeErr(t, err).Code)
	require.Len(t, h.objects(), 1)
}

// slow_create: the create holds its key and executes only after the fault
// timeout, though its caller gave up long before; a list meanwhile finds
// nothing, a retry under the key is told it is in use, and the object
// appears afterwards. It is the request's only fault: a queued execution
// fault is left for the next create.
func TestStripeSlowCreateExecutesAfterTheCallerGaveUp(t *testing.T) {
	h := newHarness(t, psp.Config{})
	h.putFaults(`{"timeout":"400ms","next":[{"kind":"slow_create"},{"kind":"invalid_account"}]}`)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	params := payoutParams("key-slow", "pay_slow", 900)
	params.Context = ctx
	_, err := h.payouts.New(params)
	require.Error(t, err)
	require.Empty(t, h.objects(), "not executed yet")
	var list struct {
		Data []map[string]any `json:"data"`
	}
	resp := h.do(http.MethodGet, "/v1/payouts", nil, http.Header{"Authorization": {"Bearer " + stripeKey}}, &list)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotNil(t, list.Data)
	require.Empty(t, list.Data, "a lookup meanwhile finds nothing")
	_, err = h.payouts.New(payoutParams("key-slow", "pay_slow", 900))
	require.Equal(t, http.StatusConflict, stripeErr(t, err).HTTPStatusCode, "the key is held while it executes")

	eventually(t, "the slow create executes", func() bool { return len(h.objects()) == 1 })
	require.Equal(t, "key-slow", h.objects()[0].IdempotencyKey)
	p, err := h.payouts.New(payoutParams("key-slow", "pay_slow", 900))
	require.NoError(t, err)
	require.Equal(t, h.objects()[0].ID, p.ID, "replayed")

	_, err = h.payouts.New(payoutParams("key-slow-2", "pay_slow_2", 900))
	require.Equal(t, "account_invalid", string(stripeErr(t, err).Code), "the queued fault waited for the next create")
}
