// Package hmacsig is the one HMAC mechanic of the suite: a keyed digest of
// parts written one after the other, hex-encoded, and its verification in
// constant time, under any hash, pooled (Keyed) where a key signs or
// verifies on a hot path. Callers own their formats (which parts, which
// separator, which hash, which encoding: Paystack's body under SHA-512,
// Aegis's own event proof, the Standard Webhooks signature of outbound
// events), except the timestamped "t=…,v1=…" scheme, which Stripe and
// Aegis's legacy outbound signature share and which lives here
// (SignTimestamped, VerifyTimestamped). Every signer and verifier of the
// suite, its test and load tools included, goes through this package, so
// the digest is computed and compared the same way everywhere and no
// verifier compares with == and leaks a prefix through timing. Two
// verifications are left to their owners' libraries on purpose: Stripe's
// own webhooks (webhook-api uses stripe-go's webhook package: what Stripe's
// header means is Stripe's to define), and our outbound deliveries in tests
// and tools (the Standard Webhooks specification's Go library: what a
// receiver's library accepts is the evidence, not our own reading of it).
package hmacsig

import (
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"sync"
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

// Base64 is the standard-base64-encoded HMAC of parts, written in order,
// under key with the hash h: the digest the Standard Webhooks signature
// (pkg/outbound) carries.
func Base64(h func() hash.Hash, key []byte, parts ...[]byte) string {
	m := hmac.New(h, key)
	for _, p := range parts {
		m.Write(p)
	}
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Equal compares two hex digests in constant time (for equal lengths).
func Equal(got, want string) bool { return hmac.Equal([]byte(got), []byte(want)) }

// Verify reports whether sig, hex-encoded (either case), is the HMAC of
// parts under key with the hash h, compared in constant time.
func Verify(h func() hash.Hash, key []byte, sig string, parts ...[]byte) bool {
	return verify(hmac.New(h, key), sig, parts)
}

// Keyed computes HMACs under one key many times, reusing its hash states
// (hmac's Reset keeps the keyed pads): for a key used on a hot path, where
// hmac.New's allocations and key schedule per message would dominate.
// Safe for concurrent use.
type Keyed struct {
	pool sync.Pool
}

// NewKeyed returns a Keyed for key with the hash h.
func NewKeyed(h func() hash.Hash, key []byte) *Keyed {
	k := append([]byte(nil), key...)
	return &Keyed{pool: sync.Pool{New: func() any { return hmac.New(h, k) }}}
}

// Hex is Hex(h, key, parts...).
func (k *Keyed) Hex(parts ...[]byte) string {
	m := k.pool.Get().(hash.Hash)
	m.Reset()
	for _, p := range parts {
		m.Write(p)
	}
	var sum [sha512.Size]byte
	out := hex.EncodeToString(m.Sum(sum[:0]))
	k.pool.Put(m)
	return out
}

// Verify is Verify(h, key, sig, parts...).
func (k *Keyed) Verify(sig string, parts ...[]byte) bool {
	m := k.pool.Get().(hash.Hash)
	m.Reset()
	ok := verify(m, sig, parts)
	k.pool.Put(m)
	return ok
}

// verify writes parts to m (fresh or reset) and compares its sum with the
// hex digest sig.
func verify(m hash.Hash, sig string, parts [][]byte) bool {
	if len(sig) != 2*m.Size() {
		return false
	}
	for _, p := range parts {
		m.Write(p)
	}
	var sum [sha512.Size]byte
	return matches(m.Sum(sum[:0]), sig)
}

// matches compares the digest sum with the hex digest sig (either case) in
// constant time for a sig of the right length.
func matches(sum []byte, sig string) bool {
	var got [sha512.Size]byte
	if len(sig) != 2*len(sum) || len(sum) > len(got) {
		return false
	}
	if _, err := hex.Decode(got[:len(sum)], []byte(sig)); err != nil {
		return false
	}
	return hmac.Equal(sum, got[:len(sum)])
}
