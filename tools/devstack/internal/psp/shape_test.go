package psp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

// jsonType names a decoded JSON value's type.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// shapeDiff lists how ours falls short of want, Stripe's shape: a key of
// want's top level that ours lacks, or has with another JSON type (null on
// either side goes with any type). For a list it also compares the first
// item of data, one level in.
func shapeDiff(want, ours map[string]any) []string {
	var diffs []string
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w := want[k]
		o, ok := ours[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: missing (Stripe: %s)", k, jsonType(w)))
		case w != nil && o != nil && jsonType(w) != jsonType(o):
			diffs = append(diffs, fmt.Sprintf("%s: %s, Stripe: %s", k, jsonType(o), jsonType(w)))
		}
	}
	wd, _ := want["data"].([]any)
	od, _ := ours["data"].([]any)
	if want["object"] == "list" && len(wd) > 0 && len(od) > 0 {
		wi, _ := wd[0].(map[string]any)
		oi, _ := od[0].(map[string]any)
		for _, d := range shapeDiff(wi, oi) {
			diffs = append(diffs, "data[0]."+d)
		}
	}
	return diffs
}

func TestShapeDiffFindsMissingKeysAndOtherTypes(t *testing.T) {
	want := map[string]any{"id": "x", "amount": 1.0, "reversed": false, "description": nil, "metadata": map[string]any{},
		"object": "list", "data": []any{map[string]any{"id": "y", "created": 1.0}}}
	ours := map[string]any{"id": "x", "amount": "1", "description": "d", "metadata": nil,
		"object": "list", "data": []any{map[string]any{"id": nil}}}
	require.Equal(t, []string{
		"amount: string, Stripe: number",
		"reversed: missing (Stripe: boolean)",
		"data[0].created: missing (Stripe: number)",
	}, shapeDiff(want, ours))
	require.Empty(t, shapeDiff(want, want))
}

// stripeServer answers Stripe requests at base with key.
type stripeServer struct {
	t      *testing.T
	base   string
	client *http.Client
}

func (s stripeServer) call(method, path string, form url.Values, account string) map[string]any {
	s.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, s.base+path, body)
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "Bearer "+stripeKey)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if account != "" {
		req.Header.Set("Stripe-Account", account)
	}
	resp, err := s.client.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	require.Equal(s.t, http.StatusOK, resp.StatusCode, "%s %s %s: %s", s.base, method, path, raw)
	var out map[string]any
	require.NoError(s.t, json.Unmarshal(raw, &out))
	return out
}

// startStripeMock runs stripe-mock (pinned as a tool in pkg/go.mod): it
// answers Stripe's published fixtures, the exact shape of each object.
func startStripeMock(t *testing.T, client *http.Client) stripeServer {
	t.Helper()
	bin := proctest.Build(t, t.TempDir(), "github.com/stripe/stripe-mock", false)
	ports := proctest.FreePorts(t, 2)
	addr := proctest.Addr(ports[0])
	p := proctest.Start(t, "stripe-mock", bin, nil, "-http-addr", addr, "-https-addr", proctest.Addr(ports[1]))
	base := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/balance", nil)
		req.SetBasicAuth(stripeKey, "")
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stripeServer{t: t, base: base, client: client}
			}
		}
		if p.Exited() || ctx.Err() != nil {
			t.Fatalf("stripe-mock not ready at %s (last error %v):\n%s", base, err, strings.Join(p.Lines(), "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStandInShapesAgreeWithStripeMock fetches each kind of Connect object
// from stripe-mock and from the stand-in and fails where the stand-in's
// JSON lacks a key stripe-mock's has, or has it with another type.
func TestStandInShapesAgreeWithStripeMock(t *testing.T) {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	mock := startStripeMock(t, client)

	h := newHarness(t, psp.Config{})
	ours := stripeServer{t: t, base: h.ts.URL, client: h.ts.Client()}
	transfer := ours.call(http.MethodPost, "/v1/transfers", transferForm(1500, "usd", "acct_shape"), "")
	trID := transfer["id"].(string)
	reversal := ours.call(http.MethodPost, "/v1/transfers/"+trID+"/reversals", url.Values{"amount": {"100"}}, "")
	payout := ours.call(http.MethodPost, "/v1/payouts", payoutForm(500, "usd", "ba_shape"), "acct_shape")
	h.settle(payout["id"].(string), `{"outcome":"paid"}`)
	var pay psp.PaymentRecord
	h.do(http.MethodPost, "/_psp/payments", `{"provider":"stripe","user_id":"shape","amount":2000,"currency":"usd"}`, nil, &pay)
	charge := ours.call(http.MethodGet, "/v1/charges/"+pay.Charge, nil, "")
	txnID := charge["balance_transaction"].(string)

	kinds := []struct {
		name          string
		mock, standIn func() map[string]any
	}{
		{name: "account",
			mock:    func() map[string]any { return mock.call(http.MethodGet, "/v1/accounts/acct_123", nil, "") },
			standIn: func() map[string]any { return ours.call(http.MethodGet, "/v1/accounts/acct_shape", nil, "") }},
		{name: "bank_account",
			mock: func() map[string]any {
				return mock.call(http.MethodGet, "/v1/accounts/acct_123/external_accounts/ba_123", nil, "")
			},
			standIn: func() map[string]any {
				return ours.call(http.MethodGet, "/v1/accounts/acct_shape/external_accounts/ba_shape", nil, "")
			}},
		{name: "transfer",
			mock:    func() map[string]any { return mock.call(http.MethodGet, "/v1/transfers/tr_123", nil, "") },
			standIn: func() map[string]any { return ours.call(http.MethodGet, "/v1/transfers/"+trID, nil, "") }},
		{name: "transfer_reversal",
			mock: func() map[string]any {
				return mock.call(http.MethodPost, "/v1/transfers/tr_123/reversals", url.Values{"amount": {"100"}}, "")
			},
			standIn: func() map[string]any { return reversal }},
		{name: "payout on a connected account",
			mock: func() map[string]any { return mock.call(http.MethodGet, "/v1/payouts/po_123", nil, "acct_123") },
			standIn: func() map[string]any {
				return ours.call(http.MethodGet, "/v1/payouts/"+payout["id"].(string), nil, "acct_shape")
			}},
		{name: "platform balance",
			mock:    func() map[string]any { return mock.call(http.MethodGet, "/v1/balance", nil, "") },
			standIn: func() map[string]any { return ours.call(http.MethodGet, "/v1/balance", nil, "") }},
		{name: "connected account balance",
			mock:    func() map[string]any { return mock.call(http.MethodGet, "/v1/balance", nil, "acct_123") },
			standIn: func() map[string]any { return ours.call(http.MethodGet, "/v1/balance", nil, "acct_shape") }},
		{name: "balance_transaction of a charge",
			mock:    func() map[string]any { return mock.call(http.MethodGet, "/v1/balance_transactions/txn_123", nil, "") },
			standIn: func() map[string]any { return ours.call(http.MethodGet, "/v1/balance_transactions/"+txnID, nil, "") }},
		{name: "balance_transaction list",
			mock:    func() map[string]any { return mock.call(http.MethodGet, "/v1/balance_transactions", nil, "") },
			standIn: func() map[string]any { return ours.call(http.MethodGet, "/v1/balance_transactions", nil, "") }},
		{name: "balance_transaction list (connected account)",
			mock:    func() map[string]any { return mock.call(http.MethodGet, "/v1/balance_transactions", nil, "acct_123") },
			standIn: func() map[string]any { return ours.call(http.MethodGet, "/v1/balance_transactions", nil, "acct_shape") }},
		{name: "charge",
			mock:    func() map[string]any { return mock.call(http.MethodGet, "/v1/charges/ch_123", nil, "") },
			standIn: func() map[string]any { return charge }},
		{name: "event list (platform)",
			mock:    func() map[string]any { return mock.call(http.MethodGet, "/v1/events", nil, "") },
			standIn: func() map[string]any { return ours.call(http.MethodGet, "/v1/events", nil, "") }},
		{name: "event list (connected account)",
			mock:    func() map[string]any { return mock.call(http.MethodGet, "/v1/events", nil, "acct_123") },
			standIn: func() map[string]any { return ours.call(http.MethodGet, "/v1/events", nil, "acct_shape") }},
	}
	for _, k := range kinds {
		want, got := k.mock(), k.standIn()
		require.Equal(t, want["object"], got["object"], k.name)
		if want["object"] == "list" {
			require.NotEmpty(t, got["data"], "%s: the stand-in's list has an item to compare", k.name)
		}
		require.Empty(t, shapeDiff(want, got), "%s: the stand-in's JSON differs from Stripe's", k.name)
	}
}
