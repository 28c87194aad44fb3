package psp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/aegis-payments/aegis/pkg/paystackapi"
	"github.com/aegis-payments/aegis/pkg/provider"
)

// Paystack pays out with Paystack transfers through Aegis's Paystack client
// (pkg/paystackapi).
type Paystack struct {
	api *paystackapi.Client
}

// NewPaystack returns the payout side of api.
func NewPaystack(api *paystackapi.Client) *Paystack { return &Paystack{api: api} }

// Provider is "paystack".
func (p *Paystack) Provider() string { return string(provider.Paystack) }

// paystackTransfer is the data of a transfer answer.
type paystackTransfer struct {
	Reference    string `json:"reference"`
	TransferCode string `json:"transfer_code"`
	Status       string `json:"status"`
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
}

// CreatePayout initiates a transfer whose reference is the payout id, which
// Paystack refuses to duplicate. A "duplicate reference" answer means an
// earlier try got through: the existing transfer is fetched and returned.
func (p *Paystack) CreatePayout(ctx context.Context, req Request) (Result, error) {
	ans, err := p.api.InitiateTransfer(ctx, paystackapi.TransferRequest{Amount: req.Amount, Currency: req.Currency,
		Recipient: req.Destination, Reference: req.PayoutID, Reason: "Aegis payout " + req.PayoutID}, IdempotencyKey(req.key()))
	if err != nil {
		return Result{}, classifyTransport("paystack", err)
	}
	if ans.StatusCode == http.StatusBadRequest && strings.Contains(strings.ToLower(ans.Message), "duplicate transfer reference") {
		res, err := p.verify(ctx, req.PayoutID)
		if errors.Is(err, ErrNotFound) {
			// Paystack said "duplicate" yet cannot find it: ask again later.
			return Result{}, unknownOutcome("paystack", "transfer reported duplicate but not found", nil)
		}
		return res, err
	}
	if !ans.OK() {
		if ans.StatusCode/100 == 2 && ans.Unreadable != nil {
			// A 2xx we cannot read: the transfer may exist.
			return Result{}, unknownOutcome("paystack", "unreadable success answer", ans.Unreadable)
		}
		e := &Error{Provider: "paystack", Status: ans.StatusCode, Code: ans.Code, Message: ans.Message}
		err := classifyHTTP(e, parseRetryAfter(ans.Header.Get("Retry-After")))
		if ans.StatusCode == http.StatusTooManyRequests {
			// Paystack's error reference documents 400 (not fulfilled), 401,
			// 404 and 5xx, and no 429: a rate limit answer is not documented
			// as "not executed" there. Its Retry-After is still honoured.
			e.Unknown = true
		}
		return Result{}, err
	}
	return result(ans)
}

func (p *Paystack) verify(ctx context.Context, reference string) (Result, error) {
	ans, err := p.api.VerifyTransfer(ctx, reference)
	if err != nil {
		return Result{}, classifyTransport("paystack", err)
	}
	if ans.StatusCode == http.StatusNotFound {
		return Result{}, ErrNotFound
	}
	if !ans.OK() {
		if ans.StatusCode/100 == 2 && ans.Unreadable != nil {
			return Result{}, unknownOutcome("paystack", "unreadable lookup answer", ans.Unreadable)
		}
		err := classifyHTTP(&Error{Provider: "paystack", Status: ans.StatusCode, Code: ans.Code, Message: ans.Message},
			parseRetryAfter(ans.Header.Get("Retry-After")))
		var e *Error
		if errors.As(err, &e) {
			e.Unknown = true // a lookup that failed leaves the outcome unknown
		}
		return Result{}, err
	}
	return result(ans)
}

// FindPayout verifies the transfer by its reference, the payout id.
func (p *Paystack) FindPayout(ctx context.Context, l Lookup) (Result, error) {
	return p.verify(ctx, l.PayoutID)
}

func result(ans paystackapi.Response) (Result, error) {
	var t paystackTransfer
	if len(ans.Data) == 0 {
		return Result{}, unknownOutcome("paystack", "answer without its transfer", nil)
	}
	if err := json.Unmarshal(ans.Data, &t); err != nil {
		return Result{}, unknownOutcome("paystack", "unreadable transfer in the answer", err)
	}
	ref := t.TransferCode
	if ref == "" {
		ref = t.Reference
	}
	res := Result{Reference: ref, Status: t.Status, Amount: t.Amount,
		Currency: strings.ToLower(t.Currency), PayoutID: t.Reference}
	res.Final, res.Failed, res.Attention = PaystackStatus(t.Status)
	return res, nil
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
