package psp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/aegis-payments/aegis/pkg/provider"
)

// DefaultPaystackBase is Paystack's API.
const DefaultPaystackBase = "https://api.paystack.co"

// Paystack pays out with Paystack transfers.
type Paystack struct {
	secretKey string
	base      string
	http      *http.Client
}

// NewPaystack returns a Paystack client (apiBase "" means Paystack's own).
func NewPaystack(secretKey, apiBase string, httpClient *http.Client) *Paystack {
	if apiBase == "" {
		apiBase = DefaultPaystackBase
	}
	return &Paystack{secretKey: secretKey, base: strings.TrimRight(apiBase, "/"), http: httpClient}
}

// Provider is "paystack".
func (p *Paystack) Provider() string { return string(provider.Paystack) }

type paystackAnswer struct {
	Status  bool   `json:"status"`
	Message string `json:"message"`
	Code    string `json:"code"`
	Data    struct {
		Reference    string `json:"reference"`
		TransferCode string `json:"transfer_code"`
		Status       string `json:"status"`
		Amount       int64  `json:"amount"`
		Currency     string `json:"currency"`
	} `json:"data"`
}

// CreatePayout initiates a transfer whose reference is the payout id, which
// Paystack refuses to duplicate. A "duplicate reference" answer means an
// earlier try got through: the existing transfer is fetched and returned.
func (p *Paystack) CreatePayout(ctx context.Context, req Request) (Result, error) {
	body, err := json.Marshal(map[string]any{
		"source": "balance", "amount": req.Amount, "currency": strings.ToUpper(req.Currency),
		"recipient": req.Destination, "reference": req.PayoutID, "reason": "Aegis payout " + req.PayoutID,
	})
	if err != nil {
		return Result{}, fmt.Errorf("encode transfer: %w", err)
	}
	ans, status, hdr, err := p.do(ctx, http.MethodPost, "/transfer", body, req.key())
	if err != nil {
		return Result{}, err
	}
	if status == http.StatusBadRequest && strings.Contains(strings.ToLower(ans.Message), "duplicate transfer reference") {
		res, err := p.verify(ctx, req.PayoutID)
		if errors.Is(err, ErrNotFound) {
			// Paystack said "duplicate" yet cannot find it: ask again later.
			return Result{}, unknownOutcome("paystack", "transfer reported duplicate but not found", nil)
		}
		return res, err
	}
	if status/100 != 2 || !ans.Status {
		e := &Error{Provider: "paystack", Status: status, Code: ans.Code, Message: ans.Message}
		err := classifyHTTP(e, parseRetryAfter(hdr.Get("Retry-After")))
		if status == http.StatusTooManyRequests {
			// Paystack's error reference documents 400 (not fulfilled), 401,
			// 404 and 5xx, and no 429: a rate limit answer is not documented
			// as "not executed" there. Its Retry-After is still honoured.
			e.Unknown = true
		}
		return Result{}, err
	}
	return result(ans), nil
}

func (p *Paystack) verify(ctx context.Context, reference string) (Result, error) {
	ans, status, hdr, err := p.do(ctx, http.MethodGet, "/transfer/verify/"+url.PathEscape(reference), nil, "")
	if err != nil {
		return Result{}, err
	}
	if status == http.StatusNotFound {
		return Result{}, ErrNotFound
	}
	if status/100 != 2 || !ans.Status {
		err := classifyHTTP(&Error{Provider: "paystack", Status: status, Code: ans.Code, Message: ans.Message},
			parseRetryAfter(hdr.Get("Retry-After")))
		var e *Error
		if errors.As(err, &e) {
			e.Unknown = true // a lookup that failed leaves the outcome unknown
		}
		return Result{}, err
	}
	return result(ans), nil
}

// FindPayout verifies the transfer by its reference, the payout id.
func (p *Paystack) FindPayout(ctx context.Context, l Lookup) (Result, error) {
	return p.verify(ctx, l.PayoutID)
}

func result(ans paystackAnswer) Result {
	ref := ans.Data.TransferCode
	if ref == "" {
		ref = ans.Data.Reference
	}
	res := Result{Reference: ref, Status: ans.Data.Status, Amount: ans.Data.Amount,
		Currency: strings.ToLower(ans.Data.Currency), PayoutID: ans.Data.Reference}
	res.Final, res.Failed, res.Attention = PaystackStatus(ans.Data.Status)
	return res
}

// PaystackStatus maps every transfer status Paystack documents ("How
// transfers work": the statuses of data.status, and which are conclusive)
// to what it means for the payout:
//
//	success                               paid (conclusive; the bank may credit later)
//	failed, reversed                      not paid: the money did not leave or was returned (conclusive)
//	abandoned                             not paid: no OTP within 30 minutes, never processed (conclusive)
//	blocked, rejected                     not paid: a transfer-approval server did not approve it (conclusive)
//	pending, received                     still moving at Paystack (not conclusive); a webhook or lookup finishes it
//	otp                                   waits for a person to enter an OTP (AttentionOTP)
//	anything else                         undocumented: never settled on (AttentionUnmapped)
//
// Paystack asks for a conclusive status before a transfer is retried, and
// a retry to reuse the reference: nothing here but the conclusive failures
// lets a payout be failed.
func PaystackStatus(status string) (paid, failed bool, attention Attention) {
	switch strings.ToLower(strings.TrimSpace(status)) {
	case "success":
		return true, false, ""
	case "failed", "reversed", "abandoned", "blocked", "rejected":
		return false, true, ""
	case "pending", "received":
		return false, false, ""
	case "otp":
		return false, false, AttentionOTP
	}
	return false, false, AttentionUnmapped
}

func (p *Paystack) do(ctx context.Context, method, path string, body []byte, idemKey string) (paystackAnswer, int, http.Header, error) {
	var ans paystackAnswer
	req, err := http.NewRequestWithContext(ctx, method, p.base+path, bytes.NewReader(body))
	if err != nil {
		return ans, 0, nil, fmt.Errorf("build paystack request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+p.secretKey)
	req.Header.Set("Content-Type", "application/json")
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", IdempotencyKey(idemKey))
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return ans, 0, nil, classifyTransport("paystack", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return ans, 0, nil, classifyTransport("paystack", err)
	}
	if err := json.Unmarshal(raw, &ans); err != nil && resp.StatusCode/100 == 2 {
		// A 2xx we cannot read: the transfer may exist.
		return ans, 0, nil, unknownOutcome("paystack", "unreadable success answer", err)
	}
	return ans, resp.StatusCode, resp.Header, nil
}
