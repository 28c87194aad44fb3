// Package hmacsig is the one HMAC mechanic of the suite: a keyed digest of
// parts written one after the other, hex-encoded, and its comparison in
// constant time. Callers own their formats (which parts, which separator,
// which hash: Stripe's "<t>.<body>" under SHA-256, Paystack's body under
// SHA-512, Aegis's own event proof); this package only makes sure the digest
// is computed and compared the same way everywhere, so that no signer
// compares with == and leaks a prefix through timing.
package hmacsig

import (
	"crypto/hmac"
	"encoding/hex"
	"hash"
)

// Hex is the hex-encoded HMAC of parts, written in order, under key with
// the hash h (sha256.New, sha512.New).
func Hex(h func() hash.Hash, key []byte, parts ...[]byte) string {
	m := hmac.New(h, key)
	for _, p := range parts {
		m.Write(p)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// Equal compares two hex digests in constant time (for equal lengths).
func Equal(got, want string) bool { return hmac.Equal([]byte(got), []byte(want)) }
