package psp_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

type paystackTransfer struct {
	Reference     string  `json:"reference"`
	Integration   int64   `json:"integration"`
	Domain        string  `json:"domain"`
	Amount        int64   `json:"amount"`
	Currency      string  `json:"currency"`
	Source        string  `json:"source"`
	Reason        string  `json:"reason"`
	Recipient     string  `json:"recipient"`
	Status        string  `json:"status"`
	TransferCode  string  `json:"transfer_code"`
	ID            int64   `json:"id"`
	TransferredAt *string `json:"transferred_at"`
	CreatedAt     string  `json:"createdAt"`
	UpdatedAt     string  `json:"updatedAt"`
}

type paystackResp struct {
	Status  bool             `json:"status"`
	Message string           `json:"message"`
	Code    string           `json:"code"`
	Data    paystackTransfer `json:"data"`
}

func transferBody(ref, recipient string, amount int64) map[string]any {
	return map[string]any{
		"source":    "balance",
		"amount":    amount,
		"recipient": recipient,
		"reference": ref,
		"reason":    "aegis payout",
		"currency":  "NGN",
	}
}

func (h *harness) paystackTransfer(body any, hdr http.Header) (*http.Response, paystackResp) {
	h.t.Helper()
	if hdr == nil {
		hdr = paystackHeader()
	}
	var out paystackResp
	resp := h.do(http.MethodPost, "/transfer", body, hdr, &out)
	return resp, out
}

func TestPaystackSameReferenceIsOneTransfer(t *testing.T) {
	h := newHarness(t, psp.Config{})
	resp, first := h.paystackTransfer(transferBody("pay_ref_1", "RCP_abc", 50000), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, first.Status)
	require.Equal(t, "Transfer has been queued", first.Message)
	d := first.Data
	require.Equal(t, "pay_ref_1", d.Reference)
	require.Equal(t, "test", d.Domain)
	require.Equal(t, int64(50000), d.Amount)
	require.Equal(t, "NGN", d.Currency)
	require.Equal(t, "balance", d.Source)
	require.Equal(t, "aegis payout", d.Reason)
	require.Equal(t, "RCP_abc", d.Recipient)
	require.Equal(t, "pending", d.Status)
	require.Regexp(t, `^TRF_[0-9a-z]{15}$`, d.TransferCode)
	require.NotZero(t, d.ID)
	require.NotZero(t, d.Integration)
	require.NotEmpty(t, d.CreatedAt)
	require.NotEmpty(t, d.UpdatedAt)

	resp, second := h.paystackTransfer(transferBody("pay_ref_1", "RCP_abc", 50000), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, second.Status)
	require.Equal(t, d.TransferCode, second.Data.TransferCode)
	require.Equal(t, d.ID, second.Data.ID)

	objs := h.objects()
	require.Len(t, objs, 1)
	require.Equal(t, psp.ProviderPaystack, objs[0].Provider)
	require.Equal(t, psp.KindTransfer, objs[0].Kind)
	require.Equal(t, d.TransferCode, objs[0].ID)
	require.Equal(t, "pay_ref_1", objs[0].Reference)
	require.Equal(t, "pay_ref_1", objs[0].PayoutID)
	require.Equal(t, "RCP_abc", objs[0].Destination)

	calls := h.calls()
	require.Equal(t, []string{psp.OutcomeCreated, psp.OutcomeReplayed}, outcomes(calls))
	require.Equal(t, "pay_ref_1", calls[0].PayoutID)
}

func TestPaystackSameReferenceDifferentParams(t *testing.T) {
	h := newHarness(t, psp.Config{})
	resp, _ := h.paystackTransfer(transferBody("pay_ref_2", "RCP_abc", 50000), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp, out := h.paystackTransfer(transferBody("pay_ref_2", "RCP_abc", 60000), nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.False(t, out.Status)
	require.Equal(t, "Duplicate Transfer Reference", out.Message)
	require.Len(t, h.objects(), 1)
}

func TestPaystackConcurrentSameReference(t *testing.T) {
	h := newHarness(t, psp.Config{})
	var wg sync.WaitGroup
	codes := make([]string, 20)
	for i := range codes {
		wg.Go(func() {
			resp, out := h.paystackTransfer(transferBody("pay_ref_race", "RCP_abc", 100), nil)
			if resp.StatusCode == http.StatusOK {
				codes[i] = out.Data.TransferCode
			}
		})
	}
	wg.Wait()
	objs := h.objects()
	require.Len(t, objs, 1)
	for _, c := range codes {
		require.Equal(t, objs[0].ID, c)
	}
}

func TestPaystackVerify(t *testing.T) {
	h := newHarness(t, psp.Config{})
	_, created := h.paystackTransfer(transferBody("pay_ref_v", "RCP_abc", 700), nil)

	var out paystackResp
	resp := h.do(http.MethodGet, "/transfer/verify/pay_ref_v", nil, paystackHeader(), &out)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, out.Status)
	require.Equal(t, created.Data, out.Data)

	resp = h.do(http.MethodGet, "/transfer/"+created.Data.TransferCode, nil, paystackHeader(), &out)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, created.Data.TransferCode, out.Data.TransferCode)

	var missing paystackResp
	resp = h.do(http.MethodGet, "/transfer/verify/nope", nil, paystackHeader(), &missing)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.False(t, missing.Status)
	require.Equal(t, "Transfer not found", missing.Message)

	// References are scoped to the integration (secret key).
	other := http.Header{"Authorization": {"Bearer sk_test_other_integration"}}
	resp = h.do(http.MethodGet, "/transfer/verify/pay_ref_v", nil, other, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	calls := h.calls()
	require.Equal(t, "pay_ref_v", calls[1].PayoutID)
	require.Equal(t, psp.OutcomeOK, calls[1].Outcome)
}

func TestPaystackInvalidRecipient(t *testing.T) {
	h := newHarness(t, psp.Config{})
	resp, out := h.paystackTransfer(transferBody("pay_ref_inv", "RCP_invalid_1", 700), nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.False(t, out.Status)
	require.Equal(t, "Invalid transfer recipient", out.Message)
	require.Equal(t, "invalid_recipient", out.Code)

	h.putFaults(`{"provider":"paystack","next":[{"kind":"invalid_account"}]}`)
	resp, out = h.paystackTransfer(transferBody("pay_ref_inv2", "RCP_ok", 700), nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "invalid_recipient", out.Code)

	// A rejected reference is not taken.
	resp, _ = h.paystackTransfer(transferBody("pay_ref_inv2", "RCP_ok", 700), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	require.Len(t, h.objects(), 1)
	require.Equal(t, []string{psp.OutcomeRejected, psp.OutcomeRejected, psp.OutcomeCreated}, outcomes(h.calls()))
}

func TestPaystackInsufficientBalance(t *testing.T) {
	h := newHarness(t, psp.Config{})
	h.putFaults(`{"next":[{"kind":"insufficient_funds"}]}`)
	resp, out := h.paystackTransfer(transferBody("pay_ref_nsf", "RCP_ok", 700), nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.False(t, out.Status)
	require.Equal(t, "insufficient_balance", out.Code)
	require.Empty(t, h.objects())
}

func TestPaystackValidation(t *testing.T) {
	h := newHarness(t, psp.Config{})
	cases := map[string]any{
		"no amount":      map[string]any{"source": "balance", "recipient": "RCP_x", "reference": "r1"},
		"zero amount":    map[string]any{"source": "balance", "amount": 0, "recipient": "RCP_x", "reference": "r2"},
		"no recipient":   map[string]any{"source": "balance", "amount": 10, "reference": "r3"},
		"no source":      map[string]any{"amount": 10, "recipient": "RCP_x", "reference": "r4"},
		"bad source":     map[string]any{"source": "card", "amount": 10, "recipient": "RCP_x", "reference": "r5"},
		"not json":       "{",
		"string amount?": map[string]any{"source": "balance", "amount": "ten", "recipient": "RCP_x", "reference": "r6"},
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			resp, out := h.paystackTransfer(body, nil)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			require.False(t, out.Status)
			require.NotEmpty(t, out.Message)
		})
	}
	require.Empty(t, h.objects())

	// Currency defaults to NGN, reference is generated when missing.
	resp, out := h.paystackTransfer(map[string]any{"source": "balance", "amount": 10, "recipient": "RCP_x"}, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "NGN", out.Data.Currency)
	require.NotEmpty(t, out.Data.Reference)
}

func TestPaystackAuth(t *testing.T) {
	h := newHarness(t, psp.Config{})
	resp, out := h.paystackTransfer(transferBody("r", "RCP_x", 1), http.Header{"Authorization": {"Bearer pk_test_public"}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.False(t, out.Status)
	resp = h.do(http.MethodGet, "/transfer/verify/r", nil, nil, nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Empty(t, h.objects())
}

func TestPaystack5xxThenRetryIsOneTransfer(t *testing.T) {
	h := newHarness(t, psp.Config{})
	h.putFaults(`{"provider":"paystack","error_status":502,"next":[{"kind":"5xx","count":2}]}`)
	for range 2 {
		resp, out := h.paystackTransfer(transferBody("pay_ref_5xx", "RCP_abc", 100), nil)
		require.Equal(t, http.StatusBadGateway, resp.StatusCode)
		require.False(t, out.Status)
	}
	resp, _ := h.paystackTransfer(transferBody("pay_ref_5xx", "RCP_abc", 100), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = h.paystackTransfer(transferBody("pay_ref_5xx", "RCP_abc", 100), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, h.objects(), 1)
	require.Equal(t, []string{psp.OutcomeFault5xx, psp.OutcomeFault5xx, psp.OutcomeCreated, psp.OutcomeReplayed}, outcomes(h.calls()))
}

func TestPaystackIdempotencyKeyHeader(t *testing.T) {
	h := newHarness(t, psp.Config{})
	hdr := paystackHeader()
	hdr.Set("Idempotency-Key", "idem-ps-1")

	// No reference: without the key each call would create a transfer.
	body := map[string]any{"source": "balance", "amount": 10, "recipient": "RCP_x"}
	resp, first := h.paystackTransfer(body, hdr)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, second := h.paystackTransfer(body, hdr)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	require.Equal(t, first.Data, second.Data)

	resp, out := h.paystackTransfer(map[string]any{"source": "balance", "amount": 11, "recipient": "RCP_x"}, hdr)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.False(t, out.Status)
	require.Equal(t, "idempotency_error", out.Code)

	require.Len(t, h.objects(), 1)
	require.Equal(t, "idem-ps-1", h.objects()[0].IdempotencyKey)
}

func TestPaystackTimeoutAfterCreateThenRetry(t *testing.T) {
	h := newHarness(t, psp.Config{})
	h.putFaults(`{"provider":"paystack","timeout":"20ms","next":[{"kind":"timeout_after_create"}]}`)
	resp, _ := h.paystackTransfer(transferBody("pay_ref_tac", "RCP_abc", 100), nil)
	require.Equal(t, http.StatusGatewayTimeout, resp.StatusCode)
	resp, out := h.paystackTransfer(transferBody("pay_ref_tac", "RCP_abc", 100), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	objs := h.objects()
	require.Len(t, objs, 1)
	require.Equal(t, objs[0].ID, out.Data.TransferCode)
	require.Equal(t, []string{psp.OutcomeFaultTimeoutCreate, psp.OutcomeReplayed}, outcomes(h.calls()))
}

// A request made with a live key is refused, by both dialects, and does
// nothing: the stand-in must never be what a live key talks to.
func TestLiveKeysAreRefused(t *testing.T) {
	h := newHarness(t, psp.Config{})
	resp, out := h.paystackTransfer(transferBody("r", "RCP_x", 1), http.Header{"Authorization": {"Bearer sk_live_0123456789"}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.False(t, out.Status)
	resp = h.do(http.MethodGet, "/v1/events", nil, http.Header{"Authorization": {"Bearer rk_live_0123456789"}}, nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Empty(t, h.objects())
}
