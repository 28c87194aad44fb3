package eventproof

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/hmacsig"
)

// Header is the Kafka (and outbox) header that carries an event's proof.
const Header = "aegis-event-proof"

// Class is the dead-letter class of a money event without a valid proof:
// dlq-admin pages for it (alert.DeadLetterKey) as a critical alert.
const Class errclass.Class = "unproven_event"

// MinKeyLen is the shortest key accepted: 32 bytes, SHA-256's block of
// strength (RFC 2104 recommends a key at least as long as the output).
const MinKeyLen = 32

// version names the canonical encoding (see canonical).
const version = "v1"

// ErrUnproven is the cause of every refusal.
var ErrUnproven = errors.New("event has no valid proof of verification by webhook-api")

// Keys signs with the current key and verifies with it or the previous one.
type Keys struct {
	current  key
	previous *key
}

type key struct {
	id  string
	mac *hmacsig.Keyed
}

// New returns Keys signing with current and also accepting previous (""
// for none). Each must be at least MinKeyLen bytes.
func New(current, previous string) (*Keys, error) {
	if len(current) < MinKeyLen {
		return nil, fmt.Errorf("the event signing key must be at least %d bytes (it is %d)", MinKeyLen, len(current))
	}
	k := &Keys{current: newKey(current)}
	if previous != "" {
		if len(previous) < MinKeyLen {
			return nil, fmt.Errorf("the previous event signing key must be at least %d bytes (it is %d)", MinKeyLen, len(previous))
		}
		p := newKey(previous)
		k.previous = &p
	}
	return k, nil
}

func newKey(secret string) key {
	return key{id: KeyID(secret), mac: hmacsig.NewKeyed(sha256.New, []byte(secret))}
}

// KeyID names a key in proofs without revealing it: the first 8 hex digits
// of SHA-256 over a fixed label and the key.
func KeyID(secret string) string {
	return hmacsig.Hex(sha256.New, []byte("aegis-event-key-id"), []byte(secret))[:8]
}

// CurrentKeyID is the id of the key Sign uses (logged at start-up, so that
// operators can see which key each service holds).
func (k *Keys) CurrentKeyID() string { return k.current.id }

// Required reports whether an event with action a moves money, and so is
// acted on only with a valid proof: every action but none.
func Required(a event.Action) bool { return a != event.ActionNone }

// Sign returns the proof of e under the current key: "v1:<key id>:<hex>".
func (k *Keys) Sign(e event.PSPEvent) string {
	return version + ":" + k.current.id + ":" + k.current.sum(e)
}

// Verify returns nil if proof is a valid proof of e under the current or
// the previous key, and an error wrapping ErrUnproven otherwise.
func (k *Keys) Verify(e event.PSPEvent, proof string) error {
	if proof == "" {
		return fmt.Errorf("%w: no %s header", ErrUnproven, Header)
	}
	v, rest, ok1 := strings.Cut(proof, ":")
	id, sig, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || v != version {
		return fmt.Errorf("%w: malformed proof (want %s:<key id>:<hmac>)", ErrUnproven, version)
	}
	var kk *key
	switch {
	case id == k.current.id:
		kk = &k.current
	case k.previous != nil && id == k.previous.id:
		kk = k.previous
	default:
		return fmt.Errorf("%w: signed with key %q, which this service does not hold", ErrUnproven, id)
	}
	if !hmacsig.Equal(sig, kk.sum(e)) {
		return fmt.Errorf("%w: the proof does not match the event (key %s)", ErrUnproven, id)
	}
	return nil
}

func (k key) sum(e event.PSPEvent) string { return k.mac.Hex(canonical(e)) }

// canonical is the v1 encoding of every field of e the worker acts on, in
// a fixed order, each length-prefixed so that no two events share one.
func canonical(e event.PSPEvent) []byte {
	b := make([]byte, 0, 256)
	str := func(s string) []byte {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		return append(b, s...)
	}
	num := func(n int64) []byte {
		var d [20]byte
		digits := strconv.AppendInt(d[:0], n, 10)
		b = strconv.AppendInt(b, int64(len(digits)), 10)
		b = append(b, ':')
		return append(b, digits...)
	}
	b = str("aegis.psp_event." + version)
	b = str(e.Provider)
	b = str(e.EventID)
	b = str(e.Type)
	b = str(string(e.Action))
	b = str(e.UserID)
	b = num(e.Amount)
	b = str(e.Currency)
	b = str(e.Reference)
	b = str(e.PayoutID)
	b = str(e.ObjectStatus)
	b = str(e.FailureCode)
	b = str(e.Account)
	switch {
	case e.Livemode == nil:
		b = str("")
	case *e.Livemode:
		b = str("true")
	default:
		b = str("false")
	}
	b = str(strconv.FormatBool(e.Stale))
	b = str(e.OccurredAt.UTC().Format(time.RFC3339Nano))
	b = num(int64(len(e.Returns)))
	for _, r := range e.Returns {
		b = str(r.ID)
		b = num(r.Amount)
		b = str(r.Currency)
		b = str(r.Outcome)
	}
	return b
}
