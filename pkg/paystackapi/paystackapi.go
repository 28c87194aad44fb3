package paystackapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultBase is Paystack's API.
const DefaultBase = "https://api.paystack.co"

// maxBody bounds an answer read (a list page of 100 objects fits many times).
const maxBody = 32 << 20

// Client sends Aegis's requests to Paystack.
type Client struct {
	key  string
	base string
	http *http.Client
}

// New returns a client for secretKey. apiBase overrides Paystack's URL
// (PAYSTACK_API_BASE: the stand-in in dev and tests); "" is Paystack's own.
// A nil httpClient is one with a 30-second timeout.
func New(secretKey, apiBase string, httpClient *http.Client) *Client {
	if apiBase == "" {
		apiBase = DefaultBase
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{key: secretKey, base: strings.TrimRight(apiBase, "/"), http: httpClient}
}

// Envelope is Paystack's JSON answer.
type Envelope struct {
	Status  bool            `json:"status"`
	Message string          `json:"message"`
	Code    string          `json:"code"`
	Data    json.RawMessage `json:"data"`
	Meta    struct {
		PageCount int `json:"pageCount"`
		Page      int `json:"page"`
	} `json:"meta"`
}

// Response is one answer as Paystack gave it.
type Response struct {
	StatusCode int
	Header     http.Header
	Envelope
	// Unreadable is why the body is not Paystack's envelope (nil when it is).
	Unreadable error
}

// OK reports a 2xx whose envelope says status true.
func (r Response) OK() bool { return r.StatusCode/100 == 2 && r.Status && r.Unreadable == nil }

// Do sends one request: body (if not nil) as JSON, idempotencyKey (if not
// "") as the Idempotency-Key header. The error is a transport failure only;
// every answer Paystack gave, 4xx and 5xx included, is a Response.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body any, idempotencyKey string) (Response, error) {
	var payload io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return Response{}, fmt.Errorf("paystack %s %s: encode: %w", method, path, err)
		}
		payload = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, payload)
	if err != nil {
		return Response{}, fmt.Errorf("paystack %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("paystack %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return Response{}, fmt.Errorf("paystack %s %s: read answer: %w", method, path, err)
	}
	out := Response{StatusCode: resp.StatusCode, Header: resp.Header}
	if err := json.Unmarshal(raw, &out.Envelope); err != nil {
		out.Unreadable = err
	}
	return out, nil
}

// TransferRequest initiates a transfer from the balance to a recipient
// (POST /transfer).
type TransferRequest struct {
	Amount   int64
	Currency string
	// Recipient is the transfer recipient's code (RCP_…).
	Recipient string
	// Reference is ours; Paystack refuses a second transfer with it.
	Reference string
	Reason    string
}

// InitiateTransfer sends POST /transfer.
func (c *Client) InitiateTransfer(ctx context.Context, r TransferRequest, idempotencyKey string) (Response, error) {
	return c.Do(ctx, http.MethodPost, "/transfer", nil, map[string]any{
		"source": "balance", "amount": r.Amount, "currency": strings.ToUpper(r.Currency),
		"recipient": r.Recipient, "reference": r.Reference, "reason": r.Reason,
	}, idempotencyKey)
}

// VerifyTransfer reads the transfer with our reference
// (GET /transfer/verify/{reference}).
func (c *Client) VerifyTransfer(ctx context.Context, reference string) (Response, error) {
	return c.Do(ctx, http.MethodGet, "/transfer/verify/"+url.PathEscape(reference), nil, nil, "")
}

// FinalizeTransfer completes a transfer that waits for the one-time
// password Paystack sent to the business (POST /transfer/finalize_transfer).
func (c *Client) FinalizeTransfer(ctx context.Context, transferCode, otp string) (Response, error) {
	return c.Do(ctx, http.MethodPost, "/transfer/finalize_transfer", nil,
		map[string]string{"transfer_code": transferCode, "otp": otp}, "")
}

// Recipient reads a transfer recipient by its code
// (GET /transferrecipient/{id_or_code}).
func (c *Client) Recipient(ctx context.Context, code string) (Response, error) {
	return c.Do(ctx, http.MethodGet, "/transferrecipient/"+url.PathEscape(code), nil, nil, "")
}

// ErrNotFound means Paystack answered 404.
var ErrNotFound = errors.New("not found at Paystack")

// maxListed bounds one listing: past it the listing fails rather than
// reporting a partial record as the whole.
const maxListed = 100_000

// List pages a Paystack list (GET path, perPage 100, from since, newest
// first) and returns every item.
func (c *Client) List(ctx context.Context, path string, since time.Time) ([]json.RawMessage, error) {
	var all []json.RawMessage
	for page := 1; ; page++ {
		q := url.Values{"perPage": {"100"}, "page": {strconv.Itoa(page)}, "from": {since.UTC().Format(time.RFC3339)}}
		resp, err := c.Do(ctx, http.MethodGet, path, q, nil, "")
		if err != nil {
			return nil, err
		}
		if err := resp.Err(path); err != nil {
			return nil, err
		}
		var items []json.RawMessage
		if err := json.Unmarshal(resp.Data, &items); err != nil {
			return nil, fmt.Errorf("paystack %s: decode list: %w", path, err)
		}
		all = append(all, items...)
		if len(all) > maxListed {
			return nil, fmt.Errorf("paystack %s: more than %d", path, maxListed)
		}
		if page >= resp.Meta.PageCount || len(items) == 0 {
			return all, nil
		}
	}
}

// Err is the answer as an error for a read that wanted it OK: ErrNotFound
// for a 404, the status and message otherwise; nil when OK.
func (r Response) Err(path string) error {
	switch {
	case r.StatusCode == http.StatusNotFound:
		return fmt.Errorf("paystack %s: %w", path, ErrNotFound)
	case r.StatusCode != http.StatusOK:
		return fmt.Errorf("paystack %s: status %d: %s", path, r.StatusCode, r.Message)
	case r.Unreadable != nil:
		return fmt.Errorf("paystack %s: decode: %w", path, r.Unreadable)
	case !r.Status:
		return fmt.Errorf("paystack %s: %s", path, r.Message)
	}
	return nil
}
