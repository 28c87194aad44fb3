package deliver

import (
	"errors"
	"fmt"
	"time"

	"github.com/aegis-payments/aegis/pkg/hmacsig"
)

// Header names of an outbound settlement webhook.
const (
	HeaderSignature = "Aegis-Signature"
	HeaderEventID   = "Aegis-Event-Id"
	HeaderEventType = "Aegis-Event-Type"
)

// Sign returns the Aegis-Signature value for body sent at t:
// t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" under secret>
// (hmacsig's timestamped scheme, the one Stripe uses).
func Sign(secret string, t time.Time, body []byte) string {
	return hmacsig.SignTimestamped([]byte(secret), t, body)
}

// ErrSignature is a signature that does not prove the body came from Aegis
// just now.
var ErrSignature = errors.New("settlement webhook signature")

// Verify is what a receiver does: it accepts header for body only if one of
// its v1 values is the HMAC of "<t>.<body>" under secret (compared in
// constant time) and t is within tolerance of now, so a captured request
// cannot be replayed later.
func Verify(secret, header string, body []byte, tolerance time.Duration, now time.Time) error {
	if err := hmacsig.VerifyTimestamped([]byte(secret), header, body, tolerance, now); err != nil {
		return fmt.Errorf("%w: %w", ErrSignature, err)
	}
	return nil
}
