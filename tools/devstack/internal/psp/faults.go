package psp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Provider names a PSP the stand-in imitates.
type Provider string

// Providers.
const (
	ProviderStripe   Provider = "stripe"
	ProviderPaystack Provider = "paystack"
)

var providers = []Provider{ProviderStripe, ProviderPaystack}

// FaultKind names one injectable fault.
type FaultKind string

// Fault kinds. The first three are infrastructure faults: they are decided
// before the idempotency layer and never stored under an idempotency key
// (a Stripe 5xx excepted, as Stripe saves it). slow_create is decided there
// too, but the create then claims its key and executes late. The others are
// decided when a create actually executes.
const (
	Fault5xx                FaultKind = "5xx"
	Fault429                FaultKind = "429"
	FaultTimeout            FaultKind = "timeout"
	FaultTimeoutAfterCreate FaultKind = "timeout_after_create"
	FaultInvalidAccount     FaultKind = "invalid_account"
	FaultInsufficientFunds  FaultKind = "insufficient_funds"
	// FaultErrorAfterCreate executes the create (the object exists and
	// settles as usual) and then answers ErrorStatus, saved under the
	// Idempotency-Key as Stripe saves a 5xx once execution began: the
	// caller sees a server error for a request that moved money.
	FaultErrorAfterCreate FaultKind = "error_after_create"
	// FaultSlowCreate holds the create (and its idempotency key) for the
	// fault Timeout before executing it, whether or not the caller still
	// waits: a caller with a shorter timeout sees an unknown outcome, and a
	// lookup meanwhile finds nothing, yet the object appears afterwards.
	FaultSlowCreate FaultKind = "slow_create"
)

func (k FaultKind) valid() bool {
	switch k {
	case Fault5xx, Fault429, FaultTimeout, FaultTimeoutAfterCreate, FaultInvalidAccount, FaultInsufficientFunds,
		FaultSlowCreate, FaultErrorAfterCreate:
		return true
	}
	return false
}

// infra reports whether k is decided before the idempotency layer.
func (k FaultKind) infra() bool {
	return k == Fault5xx || k == Fault429 || k == FaultTimeout || k == FaultSlowCreate
}

// Fault defaults.
const (
	DefaultErrorStatus       = 500
	DefaultRetryAfterSeconds = 1
	DefaultFaultTimeout      = 30 * time.Second
)

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("30s", "250ms"); a bare JSON number is read as seconds.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*d = 0
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "" {
			*d = 0
			return nil
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q", s)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("invalid duration %s", b)
	}
	if math.IsNaN(secs) || math.IsInf(secs, 0) || math.Abs(secs) > 1e9 {
		return fmt.Errorf("invalid duration %s", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// NextFault queues Count deterministic faults of one Kind.
type NextFault struct {
	Kind  FaultKind `json:"kind"`
	Count int       `json:"count"`
}

// FaultSpec is the body of PUT /_psp/faults and the value of PSP_FAULTS.
type FaultSpec struct {
	// Provider is "stripe", "paystack", or "" / "all" for both.
	Provider string `json:"provider"`

	// Infrastructure faults, drawn (in this order, one uniform draw) for
	// every money-moving request before idempotency is looked at.
	ErrorRate         float64 `json:"error_rate"`
	ErrorStatus       int     `json:"error_status"`
	RateLimitRate     float64 `json:"rate_limit_rate"`
	RetryAfterSeconds int     `json:"retry_after_seconds"`
	TimeoutRate       float64 `json:"timeout_rate"`

	// Execution faults, drawn (one uniform draw) when a validated create
	// executes (not for idempotent replays).
	TimeoutAfterCreateRate float64 `json:"timeout_after_create_rate"`
	InvalidAccountRate     float64 `json:"invalid_account_rate"`
	InsufficientFundsRate  float64 `json:"insufficient_funds_rate"`
	// ErrorAfterCreateRate: the create executes, then the caller gets
	// ErrorStatus (FaultErrorAfterCreate).
	ErrorAfterCreateRate float64 `json:"error_after_create_rate"`

	// PendingFor keeps every payout or transfer created while it is set
	// pending this long before it settles (instead of the settle delay):
	// a payout the bank takes days over.
	PendingFor Duration `json:"pending_for"`
	// OTPFor creates every Paystack transfer made while it is set in
	// status "otp" (Paystack: the transfer waits for the OTP sent to the
	// business; POST /transfer/finalize_transfer completes it). After
	// OTPFor the stand-in completes it, as an operator entering the OTP
	// would, and it settles after the settle delay.
	OTPFor Duration `json:"otp_for"`

	// DropWebhookRate is the share of payout and transfer webhooks the
	// PSP never sends (refund and dispute events are always sent), drawn when the event is created: the delivery is lost
	// for good, as when an endpoint was down past the PSP's retry window,
	// and only a lookup at the PSP finds the outcome. Shown in
	// /_psp/webhooks with state "dropped".
	DropWebhookRate float64 `json:"drop_webhook_rate"`
	// DropPaymentWebhookRate is the share of payment, refund and dispute
	// webhooks (payment_intent.succeeded, refund.*, charge.dispute.*;
	// Paystack charge.success, refund.*, charge.dispute.*) the PSP never
	// sends, drawn when the event is created. The event is still in the
	// PSP's own record (GET /v1/events, GET /transaction), so only the PSP
	// reconciliation recovers it. Shown in /_psp/webhooks as "dropped".
	DropPaymentWebhookRate float64 `json:"drop_payment_webhook_rate"`

	// Timeout is how long timeout faults hang (default 30s).
	Timeout Duration `json:"timeout"`
	// Latency is added to every PSP request (for creates: while the
	// idempotency key is held, so concurrent retries see 409).
	Latency Duration `json:"latency"`

	// Next is a FIFO of deterministic faults consumed before the rates.
	Next []NextFault `json:"next"`
}

// ParseFaultSpec decodes and validates a FaultSpec (unknown fields are
// rejected so typos do not silently disable a chaos test).
func ParseFaultSpec(data []byte) (FaultSpec, error) {
	var spec FaultSpec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return FaultSpec{}, fmt.Errorf("invalid fault JSON: %w", err)
	}
	if dec.More() {
		return FaultSpec{}, errors.New("invalid fault JSON: trailing data")
	}
	if _, err := spec.normalize(); err != nil {
		return FaultSpec{}, err
	}
	return spec, nil
}

// targets returns the providers the spec applies to.
func (f FaultSpec) targets() []Provider {
	switch Provider(f.Provider) {
	case ProviderStripe:
		return []Provider{ProviderStripe}
	case ProviderPaystack:
		return []Provider{ProviderPaystack}
	}
	return providers
}

// normalize validates f and returns a copy with defaults filled in and a
// private copy of Next.
func (f FaultSpec) normalize() (FaultSpec, error) {
	switch f.Provider {
	case "", "all", string(ProviderStripe), string(ProviderPaystack):
	default:
		return FaultSpec{}, fmt.Errorf("provider: want \"stripe\", \"paystack\" or \"\", got %q", f.Provider)
	}
	rates := []struct {
		name string
		v    float64
	}{
		{"error_rate", f.ErrorRate},
		{"rate_limit_rate", f.RateLimitRate},
		{"timeout_rate", f.TimeoutRate},
		{"timeout_after_create_rate", f.TimeoutAfterCreateRate},
		{"invalid_account_rate", f.InvalidAccountRate},
		{"insufficient_funds_rate", f.InsufficientFundsRate},
		{"error_after_create_rate", f.ErrorAfterCreateRate},
		{"drop_webhook_rate", f.DropWebhookRate},
		{"drop_payment_webhook_rate", f.DropPaymentWebhookRate},
	}
	for _, r := range rates {
		if math.IsNaN(r.v) || r.v < 0 || r.v > 1 {
			return FaultSpec{}, fmt.Errorf("%s: want a number in [0,1], got %v", r.name, r.v)
		}
	}
	if f.ErrorRate+f.RateLimitRate+f.TimeoutRate > 1+1e-9 {
		return FaultSpec{}, errors.New("error_rate + rate_limit_rate + timeout_rate must not exceed 1")
	}
	if f.TimeoutAfterCreateRate+f.InvalidAccountRate+f.InsufficientFundsRate+f.ErrorAfterCreateRate > 1+1e-9 {
		return FaultSpec{}, errors.New("timeout_after_create_rate + invalid_account_rate + insufficient_funds_rate + error_after_create_rate must not exceed 1")
	}
	switch {
	case f.ErrorStatus == 0:
		f.ErrorStatus = DefaultErrorStatus
	case f.ErrorStatus < 500 || f.ErrorStatus > 599:
		return FaultSpec{}, fmt.Errorf("error_status: want 500..599, got %d", f.ErrorStatus)
	}
	switch {
	case f.RetryAfterSeconds == 0:
		f.RetryAfterSeconds = DefaultRetryAfterSeconds
	case f.RetryAfterSeconds < 0:
		return FaultSpec{}, fmt.Errorf("retry_after_seconds: must not be negative, got %d", f.RetryAfterSeconds)
	}
	switch {
	case f.Timeout == 0:
		f.Timeout = Duration(DefaultFaultTimeout)
	case f.Timeout < 0:
		return FaultSpec{}, errors.New("timeout: must not be negative")
	}
	if f.Latency < 0 {
		return FaultSpec{}, errors.New("latency: must not be negative")
	}
	if f.PendingFor < 0 {
		return FaultSpec{}, errors.New("pending_for: must not be negative")
	}
	if f.OTPFor < 0 {
		return FaultSpec{}, errors.New("otp_for: must not be negative")
	}
	next := make([]NextFault, 0, len(f.Next))
	for i, n := range f.Next {
		if !n.Kind.valid() {
			return FaultSpec{}, fmt.Errorf("next[%d].kind: unknown fault kind %q", i, n.Kind)
		}
		switch {
		case n.Count == 0:
			n.Count = 1
		case n.Count < 0:
			return FaultSpec{}, fmt.Errorf("next[%d].count: must not be negative", i)
		}
		next = append(next, n)
	}
	f.Next = next
	return f, nil
}

// faultState is the live fault configuration of one provider. Guarded by
// Server.mu.
type faultState struct {
	spec FaultSpec // normalized; spec.Next holds what is left of the queue
}

func newFaultState(spec FaultSpec, p Provider) *faultState {
	n, err := spec.normalize()
	if err != nil { // callers validate first; fall back to no faults
		n, _ = FaultSpec{}.normalize()
	}
	n.Provider = string(p)
	return &faultState{spec: n}
}

// popNext consumes one fault from the head of the queue.
func (f *faultState) popNext() FaultKind {
	head := &f.spec.Next[0]
	k := head.Kind
	head.Count--
	if head.Count <= 0 {
		f.spec.Next = f.spec.Next[1:]
	}
	return k
}

// drawInfra decides the infrastructure fault for one money-moving request.
func (f *faultState) drawInfra(rng *rand.Rand) FaultKind {
	if len(f.spec.Next) > 0 && f.spec.Next[0].Kind.infra() {
		return f.popNext()
	}
	s := f.spec
	if s.ErrorRate+s.RateLimitRate+s.TimeoutRate <= 0 {
		return ""
	}
	x := rng.Float64()
	switch {
	case x < s.ErrorRate:
		return Fault5xx
	case x < s.ErrorRate+s.RateLimitRate:
		return Fault429
	case x < s.ErrorRate+s.RateLimitRate+s.TimeoutRate:
		return FaultTimeout
	}
	return ""
}

// drawExec decides the execution fault for one create that executes.
func (f *faultState) drawExec(rng *rand.Rand) FaultKind {
	if len(f.spec.Next) > 0 && !f.spec.Next[0].Kind.infra() {
		return f.popNext()
	}
	s := f.spec
	if s.TimeoutAfterCreateRate+s.InvalidAccountRate+s.InsufficientFundsRate+s.ErrorAfterCreateRate <= 0 {
		return ""
	}
	x := rng.Float64()
	switch {
	case x < s.InvalidAccountRate:
		return FaultInvalidAccount
	case x < s.InvalidAccountRate+s.InsufficientFundsRate:
		return FaultInsufficientFunds
	case x < s.InvalidAccountRate+s.InsufficientFundsRate+s.TimeoutAfterCreateRate:
		return FaultTimeoutAfterCreate
	case x < s.InvalidAccountRate+s.InsufficientFundsRate+s.TimeoutAfterCreateRate+s.ErrorAfterCreateRate:
		return FaultErrorAfterCreate
	}
	return ""
}

// view returns a copy safe to hand out.
func (f *faultState) view() FaultSpec {
	v := f.spec
	v.Next = append([]NextFault{}, f.spec.Next...)
	return v
}
