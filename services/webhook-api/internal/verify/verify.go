package verify

import (
	"crypto/sha512"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/aegis-payments/aegis/pkg/hmacsig"
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

// Stripe verifies Stripe-Signature headers against one or more secrets,
// through Stripe's own library (stripe-go's webhook package): what a
// Stripe-Signature header means (its parts, several v1 values, the
// tolerance) is Stripe's to say. It signs through pkg/hmacsig like every
// other signer; the tests check both agree byte for byte.
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

// Paystack verifies x-paystack-signature headers: the hex HMAC-SHA512 of
// the body under the secret key, with the key's hash states pooled
// (hmacsig.Keyed) since every Paystack webhook passes here.
type Paystack struct {
	mac *hmacsig.Keyed // nil: not configured
}

// NewPaystack returns a verifier for the Paystack secret key ("" disables it).
func NewPaystack(secretKey string) *Paystack {
	if secretKey == "" {
		return &Paystack{}
	}
	return &Paystack{mac: hmacsig.NewKeyed(sha512.New, []byte(secretKey))}
}

// Verify checks the hex HMAC-SHA512 of body.
func (p *Paystack) Verify(body []byte, header string) error {
	if p.mac == nil {
		return ErrNotConfigured
	}
	header = strings.TrimSpace(header)
	if header == "" {
		return ErrMissingSignature
	}
	if !p.mac.Verify(header, body) {
		return ErrBadSignature
	}
	return nil
}

// SignPaystack returns the x-paystack-signature for body (tests and tools).
func SignPaystack(secretKey string, body []byte) string {
	return hmacsig.Hex(sha512.New, []byte(secretKey), body)
}

// SignStripe returns a Stripe-Signature header for body at t (tests and tools).
func SignStripe(secret string, body []byte, t time.Time) string {
	return hmacsig.SignTimestamped([]byte(secret), t, body)
}
