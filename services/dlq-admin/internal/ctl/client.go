package ctl

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
	"time"
)

// Exit codes: scripts branch on these.
const (
	ExitOK = 0
	// ExitError: the request failed (network, 5xx, an unexpected answer).
	ExitError = 1
	// ExitUsage: bad arguments, a 400 from the API, or a bulk action that
	// needs --yes.
	ExitUsage = 2
	// ExitAuth: 401 or 403 — no valid token, or a viewer tried to write.
	ExitAuth = 3
	// ExitNotFound: 404.
	ExitNotFound = 4
	// ExitRefused: 409 or 422 — already replayed/discarded/finished, or not
	// replayable; nothing changed.
	ExitRefused = 5
	// ExitUnhealthy: the command worked and found a problem: reconciliation
	// not ok, or a replay job that failed, was cancelled or failed letters.
	ExitUnhealthy = 6
)

// APIError is an error answer in the contract's shape.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// exitCode maps err to the exit code scripts see.
func exitCode(err error) int {
	var ae *APIError
	var ue usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		return ExitUsage
	case errors.As(err, &ae):
		switch ae.Status {
		case http.StatusBadRequest:
			return ExitUsage
		case http.StatusUnauthorized, http.StatusForbidden:
			return ExitAuth
		case http.StatusNotFound:
			return ExitNotFound
		case http.StatusConflict, http.StatusUnprocessableEntity:
			return ExitRefused
		}
	case errors.Is(err, errUnhealthy):
		return ExitUnhealthy
	}
	return ExitError
}

// client talks to one dlq-admin.
type client struct {
	base  *url.URL
	token string
	http  *http.Client
}

func newClient(base, token string, timeout time.Duration) (*client, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErrorf("--url must be http(s)://host[:port] of dlq-admin, got %q", base)
	}
	if token == "" {
		return nil, usageErrorf("no token: pass --token, set AEGISCTL_TOKEN or put `token = …` in the config file")
	}
	return &client{base: u, token: token, http: &http.Client{Timeout: timeout}}, nil
}

// do sends one request and returns the answer's body when the status is
// 2xx; any other status is an *APIError. body, when not nil, is sent as JSON.
func (c *client) do(ctx context.Context, method, path string, query url.Values, body any) (json.RawMessage, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 == 2 {
		return raw, nil
	}
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Error.Code == "" {
		e.Error.Code = "http_error"
		e.Error.Message = strings.TrimSpace(string(raw))
		if len(e.Error.Message) > 200 {
			e.Error.Message = e.Error.Message[:200] + "…"
		}
	}
	return nil, &APIError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
}

// getJSON is do for a GET decoded into v; it returns the raw answer too.
func (c *client) getJSON(ctx context.Context, path string, query url.Values, v any) (json.RawMessage, error) {
	raw, err := c.do(ctx, http.MethodGet, path, query, nil)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, fmt.Errorf("GET %s: decode answer: %w", path, err)
	}
	return raw, nil
}
