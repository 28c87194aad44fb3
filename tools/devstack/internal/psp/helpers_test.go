package psp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/payout"
	"github.com/stripe/stripe-go/v76/transfer"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	stripeKey   = "sk_test_standin"
	paystackKey = "sk_test_paystack"
)

type harness struct {
	t        *testing.T
	srv      *psp.Server
	ts       *httptest.Server
	payouts  payout.Client
	transfer transfer.Client
}

type harnessOpt func(*harnessOptions)

type harnessOptions struct {
	run bool
}

// withRun starts Server.Run for the test's lifetime.
func withRun() harnessOpt { return func(o *harnessOptions) { o.run = true } }

func newHarness(t *testing.T, cfg psp.Config, opts ...harnessOpt) *harness {
	t.Helper()
	var o harnessOptions
	for _, opt := range opts {
		opt(&o)
	}
	srv, err := psp.New(cfg, nil)
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close) // runs after Run has stopped (cleanups are LIFO)
	if o.run {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(ts.URL),
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
		HTTPClient:        ts.Client(),
	})
	return &harness{
		t:        t,
		srv:      srv,
		ts:       ts,
		payouts:  payout.Client{B: backend, Key: stripeKey},
		transfer: transfer.Client{B: backend, Key: stripeKey},
	}
}

func payoutParams(key, payoutID string, amount int64) *stripe.PayoutParams {
	p := &stripe.PayoutParams{
		Amount:      stripe.Int64(amount),
		Currency:    stripe.String("USD"),
		Destination: stripe.String("ba_123"),
		Description: stripe.String("aegis payout"),
	}
	p.AddMetadata("payout_id", payoutID)
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return p
}

// do sends a raw request and decodes a JSON answer into out (if non-nil).
func (h *harness) do(method, path string, body any, header http.Header, out any) *http.Response {
	h.t.Helper()
	var rdr io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rdr = bytes.NewBufferString(b)
	case []byte:
		rdr = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(h.t, err)
		rdr = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, h.ts.URL+path, rdr)
	require.NoError(h.t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := h.ts.Client().Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	if out != nil {
		require.NoError(h.t, json.Unmarshal(raw, out), "body: %s", raw)
	}
	return resp
}

func (h *harness) putFaults(spec string) {
	h.t.Helper()
	resp := h.do(http.MethodPut, "/_psp/faults", spec, nil, nil)
	require.Equal(h.t, http.StatusOK, resp.StatusCode)
}

func (h *harness) objects() []psp.ObjectRecord {
	h.t.Helper()
	var v psp.ObjectsView
	h.do(http.MethodGet, "/_psp/objects", nil, nil, &v)
	return v.Items
}

func (h *harness) calls() []psp.CallRecord {
	h.t.Helper()
	var v psp.CallsView
	h.do(http.MethodGet, "/_psp/calls", nil, nil, &v)
	return v.Items
}

func (h *harness) webhooks() []psp.WebhookRecord {
	h.t.Helper()
	var v psp.WebhooksView
	h.do(http.MethodGet, "/_psp/webhooks", nil, nil, &v)
	return v.Items
}

func outcomes(calls []psp.CallRecord) []string {
	out := make([]string, 0, len(calls))
	for _, c := range calls {
		out = append(out, c.Outcome)
	}
	return out
}

func stripeErr(t *testing.T, err error) *stripe.Error {
	t.Helper()
	require.Error(t, err)
	var se *stripe.Error
	require.True(t, errors.As(err, &se), "want *stripe.Error, got %T: %v", err, err)
	return se
}

func paystackHeader() http.Header {
	return http.Header{
		"Authorization": {"Bearer " + paystackKey},
		"Content-Type":  {"application/json"},
	}
}

// eventually is require.Eventually with this package's bounds: it observes
// state changes, never waits for a fixed time.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond, "timed out waiting for %s", what)
}
