package hmacsig

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The timestamped scheme is Stripe's Stripe-Signature, which Aegis's legacy
// outbound signature (Aegis-Signature, during an endpoint's transition to
// Standard Webhooks) also uses: "t=<unix seconds>,v1=<hex HMAC-SHA256 of
// "<t>.<body>">". Signing the time with the body lets a receiver refuse a
// captured request replayed later.

// Errors of VerifyTimestamped (wrapped with what was wrong).
var (
	// ErrMalformed is a header without a timestamp or a v1 signature.
	ErrMalformed = errors.New("malformed signature header")
	// ErrOutsideTolerance is a timestamp too far from now.
	ErrOutsideTolerance = errors.New("signature timestamp outside tolerance")
	// ErrNoMatch is a header none of whose v1 signatures is the body's.
	ErrNoMatch = errors.New("no v1 signature matches")
)

// SignTimestamped returns the header signing body at t under key.
func SignTimestamped(key []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + Hex(sha256.New, key, []byte(ts), []byte{'.'}, body)
}

// VerifyTimestamped accepts header for body only if one of its v1 values is
// the HMAC of "<t>.<body>" under key (hex in either case, compared in
// constant time) and t is within tolerance of now, in either direction.
func VerifyTimestamped(key []byte, header string, body []byte, tolerance time.Duration, now time.Time) error {
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
		return fmt.Errorf("%w: %q", ErrMalformed, header)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %d is %s from now, beyond the %s tolerance", ErrOutsideTolerance, sec,
			d.Round(time.Second), tolerance)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	sum := m.Sum(nil)
	for _, s := range sigs {
		if matches(sum, s) {
			return nil
		}
	}
	return ErrNoMatch
}
