package deliver

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
// t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" under secret>.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

func mac(secret, ts string, body []byte) string {
	return hmacsig.Hex(sha256.New, []byte(secret), []byte(ts), []byte{'.'}, body)
}

// ErrSignature is a signature that does not prove the body came from Aegis
// just now.
var ErrSignature = errors.New("settlement webhook signature")

// Verify is what a receiver does: it accepts header for body only if one of
// its v1 values is the HMAC of "<t>.<body>" under secret (compared in
// constant time) and t is within tolerance of now, so a captured request
// cannot be replayed later.
func Verify(secret, header string, body []byte, tolerance time.Duration, now time.Time) error {
	var ts string
	var sigs []string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: malformed header %q", ErrSignature, header)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %d is %s from now, beyond the %s tolerance", ErrSignature, sec, d.Round(time.Second), tolerance)
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmacsig.Equal(s, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 signature matches", ErrSignature)
}
