package psp_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/breaker"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/paystackapi"
	"github.com/aegis-payments/aegis/pkg/psptest"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/psp"
)

// TestMain builds the PSP stand-in once for the package's tests.
func TestMain(m *testing.M) { os.Exit(psptest.Main(m)) }

// One stand-in serves every test in this package; each test uses its own
// payout ids, and tests that set faults do not run in parallel.
func standIn(t *testing.T) *psptest.StandIn {
	t.Helper()
	return psptest.Start(t, nil)
}

func stripeClient(s *psptest.StandIn) *psp.Stripe {
	return psp.NewStripe(stripeapi.New("sk_test_aegis", s.URL, &http.Client{Timeout: 10 * time.Second}))
}

func paystackClient(s *psptest.StandIn) *psp.Paystack {
	return psp.NewPaystack(paystackapi.New("sk_test_paystack", s.URL, &http.Client{Timeout: 10 * time.Second}))
}

func req(id, dest string) psp.Request {
	return psp.Request{PayoutID: id, Amount: 1500, Currency: "usd", Destination: dest}
}

func TestStripe(t *testing.T) {
	s := standIn(t)
	c := stripeClient(s)
	ctx := context.Background()

	t.Run("payout is idempotent on the payout id", func(t *testing.T) {
		r1, err := c.CreatePayout(ctx, req("p-1", "ba_123"))
		require.NoError(t, err)
		r2, err := c.CreatePayout(ctx, req("p-1", "ba_123"))
		require.NoError(t, err)
		require.Equal(t, r1.Reference, r2.Reference)
		require.False(t, r1.Final, "a payout is finished by its webhook")
		objs := s.Objects(t, "p-1")
		require.Len(t, objs, 1)
		require.Equal(t, psp.IdempotencyKey("p-1"), objs[0].IdempotencyKey)
		require.Equal(t, "payout", objs[0].Kind)
	})

	t.Run("connected account gets a final transfer", func(t *testing.T) {
		r, err := c.CreatePayout(ctx, req("p-2", "acct_123"))
		require.NoError(t, err)
		require.True(t, r.Final)
		require.Equal(t, "transfer", s.Objects(t, "p-2")[0].Kind)
	})

	t.Run("classification", func(t *testing.T) {
		cases := []struct {
			kind    string
			class   errclass.Class
			unknown bool
		}{
			{"5xx", errclass.Transient, true},
			{"invalid_account", errclass.Permanent, false},
			{"insufficient_funds", errclass.Permanent, false},
		}
		for _, tc := range cases {
			s.SetFaults(t, psptest.Faults{Next: []psptest.Fault{{Kind: tc.kind, Count: 1}}})
			_, err := c.CreatePayout(ctx, req("p-class-"+tc.kind, "ba_1"))
			require.Error(t, err, tc.kind)
			require.Equal(t, tc.class, errclass.Of(err), "%s: %v", tc.kind, err)
			require.Equal(t, tc.unknown, psp.OutcomeUnknown(err), tc.kind)
		}
		// Every 5xx may have executed: neither PSP documents one as not.
		for _, status := range []int{500, 502, 503, 504} {
			s.SetFaults(t, psptest.Faults{ErrorStatus: status, Next: []psptest.Fault{{Kind: "5xx", Count: 1}}})
			_, err := c.CreatePayout(ctx, req(fmt.Sprintf("p-%d", status), "ba_1"))
			require.Equal(t, errclass.Transient, errclass.Of(err), "%d", status)
			require.True(t, psp.OutcomeUnknown(err), "a %d may have executed", status)
		}

		s.SetFaults(t, psptest.Faults{RetryAfterSeconds: 7, Next: []psptest.Fault{{Kind: "429", Count: 1}}})
		_, err := c.CreatePayout(ctx, req("p-429", "ba_1"))
		d, ok := errclass.RetryAfterOf(err)
		require.True(t, ok, "%v", err)
		require.Equal(t, 7*time.Second, d)
		require.False(t, psp.OutcomeUnknown(err))

		// The created-then-lost answer: our timeout, then the retry with the
		// same key gets the same payout back.
		s.SetFaults(t, psptest.Faults{Timeout: "5s", Next: []psptest.Fault{{Kind: "timeout_after_create", Count: 1}}})
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err = c.CreatePayout(short, req("p-lost", "ba_1"))
		cancel()
		require.Equal(t, errclass.Transient, errclass.Of(err), "%v", err)
		require.True(t, psp.OutcomeUnknown(err), "a timeout may have paid")
		s.ClearFaults(t)
		r, err := c.CreatePayout(ctx, req("p-lost", "ba_1"))
		require.NoError(t, err)
		objs := s.Objects(t, "p-lost")
		require.Len(t, objs, 1, "the retry must not pay twice")
		require.Equal(t, objs[0].ID, r.Reference)
	})

	t.Run("unreachable PSP is transient and known not executed", func(t *testing.T) {
		down := psp.NewStripe(stripeapi.New("sk_test_aegis", "http://127.0.0.1:1", &http.Client{Timeout: time.Second}))
		_, err := down.CreatePayout(ctx, req("p-down", "ba_1"))
		require.Equal(t, errclass.Transient, errclass.Of(err))
		require.False(t, psp.OutcomeUnknown(err))
	})
}

func TestPaystack(t *testing.T) {
	s := standIn(t)
	c := paystackClient(s)
	ctx := context.Background()

	r1, err := c.CreatePayout(ctx, psp.Request{PayoutID: "0193a9c8-0000-7000-8000-000000000001", Amount: 50000, Currency: "ngn", Destination: "RCP_abc"})
	require.NoError(t, err)
	require.NotEmpty(t, r1.Reference)
	// A retry after a lost answer: Paystack says duplicate reference; we
	// fetch the transfer instead of failing.
	r2, err := c.CreatePayout(ctx, psp.Request{PayoutID: "0193a9c8-0000-7000-8000-000000000001", Amount: 50000, Currency: "ngn", Destination: "RCP_abc"})
	require.NoError(t, err)
	require.Equal(t, r1.Reference, r2.Reference)
	require.Len(t, s.Objects(t, "0193a9c8-0000-7000-8000-000000000001"), 1)

	_, err = c.CreatePayout(ctx, psp.Request{PayoutID: "0193a9c8-0000-7000-8000-000000000002", Amount: 1, Currency: "ngn", Destination: "RCP_invalid_1"})
	require.Equal(t, errclass.Permanent, errclass.Of(err), "%v", err)
	require.False(t, psp.OutcomeUnknown(err), "a 400 was not fulfilled")

	// Paystack documents neither a 429 nor any 5xx as "not executed".
	s.SetFaults(t, psptest.Faults{Provider: "paystack", RetryAfterSeconds: 3, Next: []psptest.Fault{{Kind: "429", Count: 1}}})
	_, err = c.CreatePayout(ctx, psp.Request{PayoutID: "0193a9c8-0000-7000-8000-000000000003", Amount: 1, Currency: "ngn", Destination: "RCP_abc"})
	d, ok := errclass.RetryAfterOf(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, 3*time.Second, d)
	require.True(t, psp.OutcomeUnknown(err), "an undocumented 429 may have executed")
	s.SetFaults(t, psptest.Faults{Provider: "paystack", ErrorStatus: 503, Next: []psptest.Fault{{Kind: "5xx", Count: 1}}})
	_, err = c.CreatePayout(ctx, psp.Request{PayoutID: "0193a9c8-0000-7000-8000-000000000004", Amount: 1, Currency: "ngn", Destination: "RCP_abc"})
	require.Equal(t, errclass.Transient, errclass.Of(err), "%v", err)
	require.True(t, psp.OutcomeUnknown(err), "a 503 may have executed")
	s.ClearFaults(t)
}

func TestBreakerOpensAndRefusesWithoutCalling(t *testing.T) {
	s := standIn(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	br, err := breaker.New[psp.Result](breaker.Config{Name: "psp:stripe", ConsecutiveFailures: 5, OpenFor: time.Hour, HalfOpenProbes: 1},
		logger, breaker.NewMetrics(prometheus.NewRegistry()))
	require.NoError(t, err)
	c := psp.WithBreaker(stripeClient(s), br)
	ctx := context.Background()

	// Permanent errors do not trip it.
	s.SetFaults(t, psptest.Faults{Next: []psptest.Fault{{Kind: "invalid_account", Count: 6}}})
	for range 6 {
		_, err := c.CreatePayout(ctx, req("p-perm", "ba_1"))
		require.Equal(t, errclass.Permanent, errclass.Of(err))
	}
	require.Equal(t, "closed", c.BreakerState())

	s.SetFaults(t, psptest.Faults{Next: []psptest.Fault{{Kind: "5xx", Count: 5}}})
	for range 5 {
		_, err := c.CreatePayout(ctx, req("p-br", "ba_1"))
		require.Equal(t, errclass.Transient, errclass.Of(err))
	}
	require.Equal(t, "open", c.BreakerState())
	before := len(s.Calls(t))
	_, err = c.CreatePayout(ctx, req("p-br", "ba_1"))
	require.Equal(t, errclass.BreakerOpen, errclass.Of(err))
	require.Len(t, s.Calls(t), before, "an open breaker makes no call")
}

// FindPayout finds the PSP's object for a payout (Stripe: by
// metadata[payout_id] among listed payouts, or transfers by transfer_group;
// Paystack: verify by reference) and says ErrNotFound only when the PSP
// answered that there is none.
func TestFindPayout(t *testing.T) {
	s := standIn(t)
	ctx := context.Background()
	since := time.Now().Add(-time.Minute)
	st := stripeClient(s)
	ps := paystackClient(s)

	for _, dest := range []string{"ba_find", "acct_find"} {
		id := "p-find-" + dest
		_, err := st.FindPayout(ctx, psp.Lookup{PayoutID: id, Destination: dest, Since: since})
		require.ErrorIs(t, err, psp.ErrNotFound, dest)
		// Other payouts exist, and more than one page of them.
		for i := range 3 {
			_, err := st.CreatePayout(ctx, psp.Request{PayoutID: fmt.Sprintf("%s-other-%d", id, i), Amount: 1, Currency: "usd", Destination: dest})
			require.NoError(t, err)
		}
		created, err := st.CreatePayout(ctx, psp.Request{PayoutID: id, Amount: 1500, Currency: "usd", Destination: dest,
			IdempotencyKey: psp.AttemptKey(id, 2)})
		require.NoError(t, err)
		for i := 3; i < 6; i++ {
			_, err := st.CreatePayout(ctx, psp.Request{PayoutID: fmt.Sprintf("%s-other-%d", id, i), Amount: 1, Currency: "usd", Destination: dest})
			require.NoError(t, err)
		}
		found, err := st.FindPayout(ctx, psp.Lookup{PayoutID: id, Destination: dest, Since: since})
		require.NoError(t, err, dest)
		require.Equal(t, created.Reference, found.Reference)
		require.EqualValues(t, 1500, found.Amount)
		require.Equal(t, "usd", found.Currency)
		require.Equal(t, psp.AttemptKey(id, 2), s.Objects(t, id)[0].IdempotencyKey)
	}

	ref := "0193a9c8-0000-7000-8000-0000000000f1"
	_, err := ps.FindPayout(ctx, psp.Lookup{PayoutID: ref})
	require.ErrorIs(t, err, psp.ErrNotFound)
	created, err := ps.CreatePayout(ctx, psp.Request{PayoutID: ref, Amount: 50000, Currency: "ngn", Destination: "RCP_abc"})
	require.NoError(t, err)
	found, err := ps.FindPayout(ctx, psp.Lookup{PayoutID: ref})
	require.NoError(t, err)
	require.Equal(t, created.Reference, found.Reference)
	require.EqualValues(t, 50000, found.Amount)

	// A PSP that cannot answer leaves the outcome unknown: never "not found".
	down := psp.NewStripe(stripeapi.New("sk_test_aegis", "http://127.0.0.1:1", &http.Client{Timeout: time.Second}))
	_, err = down.FindPayout(ctx, psp.Lookup{PayoutID: "p-x", Destination: "ba_1", Since: since})
	require.Error(t, err)
	require.NotErrorIs(t, err, psp.ErrNotFound)
	require.True(t, psp.OutcomeUnknown(err))
}

func TestAttemptKeys(t *testing.T) {
	require.Equal(t, psp.IdempotencyKey("p"), psp.AttemptKey("p", 0))
	for n := range 4 {
		require.Equal(t, n, psp.KeyGeneration("p", psp.AttemptKey("p", n)))
	}
	require.NotEqual(t, psp.AttemptKey("p", 1), psp.AttemptKey("p", 2))
}

// Every transfer status Paystack documents is mapped on purpose; an
// undocumented one is never settled on (neither paid nor failed) and asks
// for a person, as does otp.
func TestPaystackStatusesAreMappedExplicitly(t *testing.T) {
	t.Parallel()
	type want struct {
		paid, failed bool
		attention    psp.Attention
	}
	cases := map[string]want{
		"success":   {paid: true},
		"failed":    {failed: true},
		"reversed":  {failed: true},
		"abandoned": {failed: true},
		"blocked":   {failed: true},
		"rejected":  {failed: true},
		"pending":   {},
		"received":  {},
		"otp":       {attention: psp.AttentionOTP},
		"queued":    {attention: psp.AttentionUnmapped},
		"":          {attention: psp.AttentionUnmapped},
	}
	for status, w := range cases {
		// Through the client, as Paystack answers a create and a verify.
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(rw, `{"status":true,"message":"ok","data":{"reference":"p-%[1]s","transfer_code":"TRF_%[1]s",`+
				`"status":%[2]q,"amount":100,"currency":"NGN"}}`, strings.ReplaceAll(status, " ", "_"), status)
		}))
		c := psp.NewPaystack(paystackapi.New("sk_test_paystack", srv.URL, srv.Client()))
		created, err := c.CreatePayout(context.Background(), req("p-"+status, "RCP_1"))
		require.NoError(t, err, status)
		found, err := c.FindPayout(context.Background(), psp.Lookup{PayoutID: "p-" + status})
		require.NoError(t, err, status)
		srv.Close()
		for _, res := range []psp.Result{created, found} {
			require.Equal(t, w.paid, res.Final, "%q paid", status)
			require.Equal(t, w.failed, res.Failed, "%q failed", status)
			require.Equal(t, w.attention, res.Attention, "%q attention", status)
			require.Equal(t, status, res.Status)
		}
	}
}

// A payout to a connected account's external account is a transfer, then
// the account's payout: each its own request under its own key, and a
// lookup that finds the transfer without the payout says so instead of
// "not found" (which would let a second transfer be sent).
func TestStripeConnectedPayout(t *testing.T) {
	s := standIn(t)
	c := stripeClient(s)
	ctx := context.Background()
	since := time.Now().Add(-time.Minute)
	const id, acct = "p-connect-1", "acct_connect1"
	r := psp.Request{PayoutID: id, Amount: 1500, Currency: "usd", Destination: acct, ExternalAccount: "ba_connect1"}
	look := psp.Lookup{PayoutID: id, Destination: acct, ExternalAccount: "ba_connect1", Since: since}

	_, err := c.FindPayout(ctx, look)
	require.ErrorIs(t, err, psp.ErrNotFound, "nothing made yet")

	tr, err := c.CreatePayout(ctx, r)
	require.NoError(t, err)
	require.True(t, tr.PayoutMissing, "a transfer whose payout is still to be made")
	require.False(t, tr.Final)
	require.Equal(t, tr.Reference, tr.Transfer)
	objs := s.Objects(t, id)
	require.Len(t, objs, 1)
	require.Equal(t, "transfer", objs[0].Kind)
	require.Equal(t, acct, objs[0].Destination)

	found, err := c.FindPayout(ctx, look)
	require.NoError(t, err, "the transfer is found: never ErrNotFound once it exists")
	require.True(t, found.PayoutMissing)
	require.Equal(t, tr.Transfer, found.Transfer)

	r.Transfer, r.IdempotencyKey = tr.Transfer, psp.ConnectedPayoutKey(psp.IdempotencyKey(id))
	po, err := c.CreatePayout(ctx, r)
	require.NoError(t, err)
	require.False(t, po.PayoutMissing)
	require.Equal(t, "pending", po.Status)
	require.Equal(t, tr.Transfer, po.Transfer)
	objs = s.Objects(t, id)
	require.Len(t, objs, 2)
	var payout psptest.Object
	for _, o := range objs {
		if o.Kind == "payout" {
			payout = o
		}
	}
	require.Equal(t, acct, payout.Account, "the payout is the connected account's (Stripe-Account)")
	require.Equal(t, "ba_connect1", payout.Destination)
	require.Equal(t, psp.ConnectedPayoutKey(psp.IdempotencyKey(id)), payout.IdempotencyKey)

	found, err = c.FindPayout(ctx, look)
	require.NoError(t, err)
	require.Equal(t, po.Reference, found.Reference)
	require.Equal(t, tr.Transfer, found.Transfer)
	require.False(t, found.PayoutMissing)
	require.EqualValues(t, 1500, found.Amount)
	require.Equal(t, id, found.PayoutID)

	// Failed on the connected account: the money is there, not back in
	// ours, so it is neither paid nor failed for the payout.
	s.Settle(t, po.Reference, "failed")
	found, err = c.FindPayout(ctx, look)
	require.NoError(t, err)
	require.Equal(t, psp.AttentionConnectedPayout, found.Attention)
	require.False(t, found.Failed, "a connected payout's failure gives nothing back to the platform")

	// A transfer we know of that Stripe's listing does not show proves
	// nothing: the outcome is unknown, not "not found".
	_, err = c.FindPayout(ctx, psp.Lookup{PayoutID: "p-connect-none", Destination: acct, ExternalAccount: "ba_connect1",
		Transfer: "tr_known", Since: since})
	require.Error(t, err)
	require.NotErrorIs(t, err, psp.ErrNotFound)
	require.True(t, psp.OutcomeUnknown(err))
}

// callCounts reads aegis_psp_call_seconds from reg: each series' count,
// keyed provider/operation/result, and checks it has the classic buckets.
func callCounts(t *testing.T, reg *prometheus.Registry) map[string]uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "aegis_psp_call_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			h := m.GetHistogram()
			require.Len(t, h.GetBucket(), 11)
			require.InDelta(t, 0.05, h.GetBucket()[0].GetUpperBound(), 1e-9)
			require.InDelta(t, 30, h.GetBucket()[10].GetUpperBound(), 1e-9)
			out[l["provider"]+"/"+l["operation"]+"/"+l["result"]] = h.GetSampleCount()
		}
	}
	return out
}

// Every call the breaker lets through is timed once, by provider,
// operation and what came of it; a call the open breaker refuses is not
// made and not timed.
func TestCallsAreTimed(t *testing.T) {
	s := standIn(t)
	reg := prometheus.NewPedanticRegistry()
	calls, err := psp.NewCallMetrics(reg)
	require.NoError(t, err)
	_, err = psp.NewCallMetrics(reg)
	require.Error(t, err, "registered once per process")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	br, err := breaker.New[psp.Result](breaker.Config{Name: "psp:stripe", ConsecutiveFailures: 2, OpenFor: time.Hour, HalfOpenProbes: 1},
		logger, breaker.NewMetrics(reg))
	require.NoError(t, err)
	st := psp.WithBreaker(psp.Timed(stripeClient(s), calls), br)
	ps := psp.Timed(paystackClient(s), calls)
	ctx := context.Background()

	_, err = st.CreatePayout(ctx, req("p-timed-1", "ba_1"))
	require.NoError(t, err)
	_, err = st.FindPayout(ctx, psp.Lookup{PayoutID: "p-timed-none", Destination: "ba_1", Since: time.Now().Add(-time.Minute)})
	require.ErrorIs(t, err, psp.ErrNotFound)
	_, err = ps.CreatePayout(ctx, psp.Request{PayoutID: "0193a9c8-0000-7000-8000-0000000000e1", Amount: 1, Currency: "ngn", Destination: "RCP_invalid_1"})
	require.Equal(t, errclass.Permanent, errclass.Of(err))
	require.Equal(t, map[string]uint64{"stripe/create/ok": 1, "stripe/find/not_found": 1, "paystack/create/permanent": 1}, callCounts(t, reg))

	// Two 5xx open the breaker; the third create is refused unsent.
	s.SetFaults(t, psptest.Faults{Provider: "stripe", Next: []psptest.Fault{{Kind: "5xx", Count: 2}}})
	defer s.ClearFaults(t)
	for range 2 {
		_, err = st.CreatePayout(ctx, req("p-timed-2", "ba_1"))
		require.Equal(t, errclass.Transient, errclass.Of(err))
	}
	_, err = st.CreatePayout(ctx, req("p-timed-2", "ba_1"))
	require.Equal(t, errclass.BreakerOpen, errclass.Of(err))
	require.Equal(t, map[string]uint64{"stripe/create/ok": 1, "stripe/find/not_found": 1, "paystack/create/permanent": 1,
		"stripe/create/transient": 2}, callCounts(t, reg))
}
