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
	"crypto/sha512"
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

// Equal compares two hex digests in constant time (for equal lengths).
func Equal(got, want string) bool { return hmac.Equal([]byte(got), []byte(want)) }

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
