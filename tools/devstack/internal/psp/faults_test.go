package psp_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

func TestFaultsAdminRoundTrip(t *testing.T) {
	h := newHarness(t, psp.Config{})

	var v psp.FaultsView
	resp := h.do(http.MethodGet, "/_psp/faults", nil, nil, &v)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "stripe", v.Stripe.Provider)
	require.Equal(t, 500, v.Stripe.ErrorStatus, "defaults are shown")
	require.Equal(t, psp.Duration(30*time.Second), v.Stripe.Timeout)
	require.Empty(t, v.Stripe.Next)

	spec := `{"provider":"","error_rate":0.2,"error_status":503,"rate_limit_rate":0.1,"retry_after_seconds":2,
		"timeout_rate":0.05,"timeout_after_create_rate":0.05,"timeout":"30s","invalid_account_rate":0.0,
		"insufficient_funds_rate":0.0,"latency":"0s","next":[{"kind":"5xx","count":3},{"kind":"timeout_after_create"}]}`
	resp = h.do(http.MethodPut, "/_psp/faults", spec, nil, &v)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, s := range []psp.FaultSpec{v.Stripe, v.Paystack} {
		require.InDelta(t, 0.2, s.ErrorRate, 1e-9)
		require.Equal(t, 503, s.ErrorStatus)
		require.Equal(t, 2, s.RetryAfterSeconds)
		require.Equal(t, []psp.NextFault{{Kind: psp.Fault5xx, Count: 3}, {Kind: psp.FaultTimeoutAfterCreate, Count: 1}}, s.Next)
	}

	resp = h.do(http.MethodPut, "/_psp/faults", `{"provider":"paystack","next":[{"kind":"429","count":2}]}`, nil, &v)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, v.Stripe.Next, 2, "stripe untouched")
	require.Equal(t, []psp.NextFault{{Kind: psp.Fault429, Count: 2}}, v.Paystack.Next)
	require.Zero(t, v.Paystack.ErrorRate)

	resp = h.do(http.MethodDelete, "/_psp/faults", nil, nil, &v)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, v.Stripe.Next)
	require.Empty(t, v.Paystack.Next)
	require.Zero(t, v.Stripe.ErrorRate)

	bad := []string{
		`{"eror_rate":0.5}`,
		`{"error_rate":1.5}`,
		`{"error_rate":0.6,"rate_limit_rate":0.6}`,
		`{"error_status":404}`,
		`{"provider":"adyen"}`,
		`{"next":[{"kind":"meteor"}]}`,
		`{"next":[{"kind":"5xx","count":-1}]}`,
		`{"timeout":"soon"}`,
		`not json`,
	}
	for _, b := range bad {
		var e struct {
			Error string `json:"error"`
		}
		resp := h.do(http.MethodPut, "/_psp/faults", b, nil, &e)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, b)
		require.NotEmpty(t, e.Error)
	}
}

func TestFaultsNextQueueCountsDown(t *testing.T) {
	h := newHarness(t, psp.Config{})
	h.putFaults(`{"provider":"stripe","next":[{"kind":"5xx","count":2},{"kind":"429"}]}`)
	// Each attempt under its own key: Stripe saves a 5xx under its key.
	for i := range 3 {
		_, err := h.payouts.New(payoutParams(fmt.Sprintf("key-q-%d", i), "pay_q", 1))
		require.Error(t, err)
	}
	_, err := h.payouts.New(payoutParams("key-q", "pay_q", 1))
	require.NoError(t, err)
	require.Equal(t, []string{psp.OutcomeFault5xx, psp.OutcomeFault5xx, psp.OutcomeFault429, psp.OutcomeCreated}, outcomes(h.calls()))
	require.Len(t, h.objects(), 1)

	// Paystack was not affected.
	resp, _ := h.paystackTransfer(transferBody("r", "RCP_x", 1), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestFaultsGETsAreNotFaulted(t *testing.T) {
	h := newHarness(t, psp.Config{})
	p, err := h.payouts.New(payoutParams("k", "p", 1))
	require.NoError(t, err)
	h.putFaults(`{"error_rate":1}`)
	_, err = h.payouts.Get(p.ID, nil)
	require.NoError(t, err)
	_, err = h.payouts.New(payoutParams("k", "p", 1))
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
}

// outcomesForSeed sends n sequential payouts (distinct keys) through a
// fresh server with the given seed and rates.
func outcomesForSeed(t *testing.T, seed uint64, n int) []string {
	t.Helper()
	spec, err := psp.ParseFaultSpec([]byte(`{"error_rate":0.3,"rate_limit_rate":0.2,"invalid_account_rate":0.2,"insufficient_funds_rate":0.1}`))
	require.NoError(t, err)
	h := newHarness(t, psp.Config{Seed: seed, Faults: spec})
	for i := range n {
		_, _ = h.payouts.New(payoutParams(fmt.Sprintf("key-%d", i), "p", 1))
	}
	return outcomes(h.calls())
}

func TestFaultsAreDeterministicWhenSeeded(t *testing.T) {
	a := outcomesForSeed(t, 42, 60)
	b := outcomesForSeed(t, 42, 60)
	require.Equal(t, a, b)
	seen := map[string]bool{}
	for _, o := range a {
		seen[o] = true
	}
	for _, want := range []string{psp.OutcomeFault5xx, psp.OutcomeFault429, psp.OutcomeRejected, psp.OutcomeCreated} {
		require.True(t, seen[want], "outcome %s should occur in 60 draws: %v", want, a)
	}
}

func TestResetWipesEverythingAndReseeds(t *testing.T) {
	h := newHarness(t, psp.Config{Seed: 7})
	h.putFaults(`{"error_rate":0.5}`)
	for range 10 {
		_, _ = h.payouts.New(payoutParams("", "p", 1))
	}
	first := outcomes(h.calls())

	resp := h.do(http.MethodDelete, "/_psp/state", nil, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, h.objects())
	require.Empty(t, h.calls())
	var v psp.FaultsView
	h.do(http.MethodGet, "/_psp/faults", nil, nil, &v)
	require.Zero(t, v.Stripe.ErrorRate, "faults are cleared")

	// Idempotency keys are forgotten too.
	_, err := h.payouts.New(payoutParams("key-reset", "p", 1))
	require.NoError(t, err)
	h.do(http.MethodDelete, "/_psp/state", nil, nil, nil)
	p, err := h.payouts.New(payoutParams("key-reset", "p", 1))
	require.NoError(t, err)
	require.Empty(t, p.LastResponse.Header.Get("Idempotent-Replayed"))

	// Same seed after reset → same decisions.
	h.do(http.MethodDelete, "/_psp/state", nil, nil, nil)
	h.putFaults(`{"error_rate":0.5}`)
	for range 10 {
		_, _ = h.payouts.New(payoutParams("", "p", 1))
	}
	require.Equal(t, first, outcomes(h.calls()))
}

func TestHangingRequestsAreReleasedWhenRunStops(t *testing.T) {
	srvCfg := psp.Config{}
	h := newHarness(t, srvCfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.srv.Run(ctx) }()

	h.putFaults(`{"timeout":"10m","next":[{"kind":"timeout"}]}`)
	errc := make(chan error, 1)
	go func() {
		_, err := h.payouts.New(payoutParams("key-hang", "pay_hang", 1))
		errc <- err
	}()
	eventually(t, "the request to hang", func() bool {
		calls := h.calls()
		return len(calls) == 1 && calls[0].Outcome == psp.OutcomeFaultTimeout
	})
	cancel()
	require.NoError(t, <-done)
	err := <-errc
	require.Equal(t, http.StatusGatewayTimeout, stripeErr(t, err).HTTPStatusCode)

	require.Error(t, h.srv.Run(context.Background()), "Run is single-use")
}

func TestHealthz(t *testing.T) {
	h := newHarness(t, psp.Config{})
	var v map[string]string
	resp := h.do(http.MethodGet, "/healthz", nil, nil, &v)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ok", v["status"])
}

func TestInitialFaultsFromConfig(t *testing.T) {
	spec, err := psp.ParseFaultSpec([]byte(`{"provider":"stripe","next":[{"kind":"invalid_account"}]}`))
	require.NoError(t, err)
	h := newHarness(t, psp.Config{Faults: spec})
	_, err = h.payouts.New(payoutParams("k", "p", 1))
	require.Equal(t, stripe.ErrorCodeAccountInvalid, stripeErr(t, err).Code)
}
