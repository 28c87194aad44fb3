package verify

import (
	"crypto/hmac"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"
)

// StripeTolerance is how old a Stripe signature timestamp may be (docs/design/contract.md, "HTTP APIs").
const StripeTolerance = 5 * time.Minute

// Errors callers map to HTTP statuses.
var (
	// ErrNotConfigured means no secret is set for the provider.
	ErrNotConfigured = errors.New("webhook secret not configured")
	// ErrMissingSignature means the signature header is absent.
	ErrMissingSignature = errors.New("signature header missing")
	// ErrBadSignature means the signature does not match the body.
	ErrBadSignature = errors.New("signature does not match")
	// ErrStale means the signature timestamp is outside the tolerance.
	ErrStale = errors.New("signature timestamp outside tolerance")
)

// Stripe verifies Stripe-Signature headers against one or more secrets.
type Stripe struct {
	secrets []string
}

// NewStripe returns a verifier for secrets (any of them is accepted).
func NewStripe(secrets []string) *Stripe { return &Stripe{secrets: secrets} }

// Verify checks header against body.
func (s *Stripe) Verify(body []byte, header string) error {
	if len(s.secrets) == 0 {
		return ErrNotConfigured
	}
	if strings.TrimSpace(header) == "" {
		return ErrMissingSignature
	}
	var last error
	for _, secret := range s.secrets {
		err := webhook.ValidatePayloadWithTolerance(body, header, secret, StripeTolerance)
		if err == nil {
			return checkNotFuture(header)
		}
		last = err
	}
	switch {
	case errors.Is(last, webhook.ErrTooOld):
		return ErrStale
	case errors.Is(last, webhook.ErrNotSigned):
		return ErrMissingSignature
	case errors.Is(last, webhook.ErrInvalidHeader):
		return fmt.Errorf("%w: malformed Stripe-Signature header", ErrBadSignature)
	default:
		return ErrBadSignature
	}
}

// checkNotFuture refuses a signature timestamp later than now plus the
// tolerance: stripe-go checks only the past. A signature from the future
// means a clock that is wrong, or a signature made to be replayed later.
func checkNotFuture(header string) error {
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		if k != "t" {
			continue
		}
		t, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: malformed Stripe-Signature timestamp", ErrBadSignature)
		}
		if t > time.Now().Add(StripeTolerance).Unix() {
			return fmt.Errorf("%w: signed in the future", ErrStale)
		}
	}
	return nil
}

// Paystack verifies x-paystack-signature headers.
type Paystack struct {
	secret []byte
}

// NewPaystack returns a verifier for the Paystack secret key ("" disables it).
func NewPaystack(secretKey string) *Paystack { return &Paystack{secret: []byte(secretKey)} }

// Verify checks the hex HMAC-SHA512 of body.
func (p *Paystack) Verify(body []byte, header string) error {
	if len(p.secret) == 0 {
		return ErrNotConfigured
	}
	header = strings.TrimSpace(header)
	if header == "" {
		return ErrMissingSignature
	}
	got, err := hex.DecodeString(header)
	if err != nil {
		return ErrBadSignature
	}
	mac := hmac.New(sha512.New, p.secret)
	mac.Write(body)
	if !hmac.Equal(mac.Sum(nil), got) {
		return ErrBadSignature
	}
	return nil
}

// SignPaystack returns the x-paystack-signature for body (tests and tools).
func SignPaystack(secretKey string, body []byte) string {
	mac := hmac.New(sha512.New, []byte(secretKey))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// SignStripe returns a Stripe-Signature header for body at t (tests and tools).
func SignStripe(secret string, body []byte, t time.Time) string {
	return fmt.Sprintf("t=%d,v1=%s", t.Unix(), hex.EncodeToString(webhook.ComputeSignature(t, body, secret)))
}
