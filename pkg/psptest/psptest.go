package psptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aegis-payments/aegis/pkg/proctest"
)

// ImportPath is the stand-in's main package.
const ImportPath = "github.com/aegis-payments/aegis/tools/devstack/cmd/aegis-psp"

// StandIn is a running PSP stand-in.
type StandIn struct {
	URL  string
	Proc *proctest.Proc
}

// prebuilt is the stand-in Main built for every test of the process, or ""
// (each Start builds its own). Main sets it before any test runs.
var prebuilt string

// Main runs a package's tests with the stand-in built once for all of them
// rather than once per Start: every build links the binary again, seconds
// of CPU, and a package whose every test starts a stand-in spends more on
// linking it than on testing. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(psptest.Main(m)) }
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "psptest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "psptest: binary directory:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	if err := proctest.BuildAll(dir, false, ImportPath); err != nil {
		fmt.Fprintln(os.Stderr, "psptest:", err)
		return 2
	}
	prebuilt = filepath.Join(dir, filepath.Base(ImportPath))
	return m.Run()
}

// Start runs the stand-in with env (PSP_ADDR is chosen here), built by Main
// or, without it, for this test.
func Start(t testing.TB, env map[string]string) *StandIn {
	t.Helper()
	bin := prebuilt
	if bin == "" {
		bin = proctest.Build(t, t.TempDir(), ImportPath, false)
	}
	port := proctest.FreePort(t)
	all := map[string]string{"PSP_ADDR": proctest.Addr(port), "PSP_SETTLE_DELAY": "0", "PSP_SEED": "1"}
	for k, v := range env {
		all[k] = v
	}
	p := proctest.Start(t, "psp-standin", bin, all)
	s := &StandIn{URL: "http://" + proctest.Addr(port), Proc: p}
	proctest.WaitHTTP(t, s.URL+"/healthz", 30*time.Second, p)
	return s
}

// Fault is one deterministic fault for the next requests.
type Fault struct {
	Kind  string `json:"kind"`
	Count int    `json:"count"`
}

// Faults is the stand-in's fault configuration (PUT /_psp/faults).
type Faults struct {
	Provider          string  `json:"provider,omitempty"`
	ErrorRate         float64 `json:"error_rate,omitempty"`
	ErrorStatus       int     `json:"error_status,omitempty"`
	RateLimitRate     float64 `json:"rate_limit_rate,omitempty"`
	RetryAfterSeconds int     `json:"retry_after_seconds,omitempty"`
	TimeoutRate       float64 `json:"timeout_rate,omitempty"`
	Timeout           string  `json:"timeout,omitempty"`
	InvalidAccount    float64 `json:"invalid_account_rate,omitempty"`
	Latency           string  `json:"latency,omitempty"`
	// OTPFor creates Paystack transfers in status otp for this long.
	OTPFor string `json:"otp_for,omitempty"`
	// DropWebhookRate drops payout outcome webhooks; DropPaymentWebhookRate
	// payment, refund and dispute webhooks (the PSP's record keeps them).
	DropWebhookRate        float64 `json:"drop_webhook_rate,omitempty"`
	DropPaymentWebhookRate float64 `json:"drop_payment_webhook_rate,omitempty"`
	Next                   []Fault `json:"next,omitempty"`
}

// Object is a payout or transfer the stand-in created.
type Object struct {
	Provider       string `json:"provider"`
	Kind           string `json:"kind"`
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	Reference      string `json:"reference"`
	PayoutID       string `json:"payout_id"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Destination    string `json:"destination"`
	Status         string `json:"status"`
	// Account is the Stripe connected account a payout was made on ("" the
	// platform).
	Account string `json:"account,omitempty"`
}

// Call is one request the stand-in received on a PSP route.
type Call struct {
	Provider       string `json:"provider"`
	Method         string `json:"method"`
	Path           string `json:"path"`
	IdempotencyKey string `json:"idempotency_key"`
	Outcome        string `json:"outcome"`
	Status         int    `json:"status"`
	PayoutID       string `json:"payout_id"`
}

// SetFaults replaces the fault configuration.
func (s *StandIn) SetFaults(t testing.TB, f Faults) {
	t.Helper()
	s.do(t, http.MethodPut, "/_psp/faults", f, nil)
}

// ClearFaults removes every fault.
func (s *StandIn) ClearFaults(t testing.TB) {
	t.Helper()
	s.do(t, http.MethodDelete, "/_psp/faults", nil, nil)
}

// Objects lists created objects, optionally for one payout id.
func (s *StandIn) Objects(t testing.TB, payoutID string) []Object {
	t.Helper()
	var out struct {
		Items []Object `json:"items"`
	}
	path := "/_psp/objects"
	if payoutID != "" {
		path += "?payout_id=" + url.QueryEscape(payoutID)
	}
	s.do(t, http.MethodGet, path, nil, &out)
	return out.Items
}

// Calls lists every PSP request received.
func (s *StandIn) Calls(t testing.TB) []Call {
	t.Helper()
	var out struct {
		Items []Call `json:"items"`
	}
	s.do(t, http.MethodGet, "/_psp/calls", nil, &out)
	return out.Items
}

// Settle finishes a payout now ("paid" or "failed") and sends its webhook.
func (s *StandIn) Settle(t testing.TB, objectID, outcome string) {
	t.Helper()
	s.do(t, http.MethodPost, "/_psp/objects/"+url.PathEscape(objectID)+"/settle", map[string]string{"outcome": outcome}, nil)
}

// Payment is a payment the stand-in was told of, with its refunds and
// disputes.
type Payment struct {
	Provider string `json:"provider"`
	ID       string `json:"id"`
	UserID   string `json:"user_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	// Fee is what the PSP kept of it (the stand-in prices as the PSP does).
	Fee int64 `json:"fee"`
}

// Return is a refund or dispute the stand-in created.
type Return struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
	Status string `json:"status"`
}

// Pay tells the stand-in a customer paid (it sends the payment's webhook).
func (s *StandIn) Pay(t testing.TB, provider, userID string, amount int64, currency string) Payment {
	t.Helper()
	var p Payment
	s.do(t, http.MethodPost, "/_psp/payments", map[string]any{"provider": provider, "user_id": userID,
		"amount": amount, "currency": currency}, &p)
	return p
}

// Refund refunds amount of a payment (0: what is left); outcome
// "succeeded" or "failed".
func (s *StandIn) Refund(t testing.TB, paymentID string, amount int64, outcome string) Return {
	t.Helper()
	var r Return
	s.do(t, http.MethodPost, "/_psp/payments/"+url.PathEscape(paymentID)+"/refunds",
		map[string]any{"amount": amount, "outcome": outcome}, &r)
	return r
}

// Dispute opens a dispute on a payment (amount 0: what is left); outcome
// "won" or "lost" closes it at once, "" leaves it open.
func (s *StandIn) Dispute(t testing.TB, paymentID string, amount int64, outcome string) Return {
	t.Helper()
	var r Return
	s.do(t, http.MethodPost, "/_psp/payments/"+url.PathEscape(paymentID)+"/disputes",
		map[string]any{"amount": amount, "outcome": outcome}, &r)
	return r
}

// CloseDispute closes an open dispute as "won" or "lost".
func (s *StandIn) CloseDispute(t testing.TB, disputeID, outcome string) Return {
	t.Helper()
	var r Return
	s.do(t, http.MethodPost, "/_psp/disputes/"+url.PathEscape(disputeID)+"/close", map[string]any{"outcome": outcome}, &r)
	return r
}

func (s *StandIn) do(t testing.TB, method, path string, in, out any) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("psptest: %v", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		t.Fatalf("psptest: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("psptest: %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("psptest: %s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("psptest: decode %s: %v", path, err)
		}
	}
}

// SuccessfulPayouts counts objects per payout id: the "never paid twice"
// check.
func SuccessfulPayouts(objects []Object) map[string]int {
	out := map[string]int{}
	for _, o := range objects {
		if o.Status != "failed" {
			out[o.PayoutID]++
		}
	}
	return out
}
