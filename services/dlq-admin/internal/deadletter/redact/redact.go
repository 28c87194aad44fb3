package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// Placeholder replaces every sensitive value.
const Placeholder = "[REDACTED]"

// maxDepth bounds nesting; encoding/json refuses deeper documents too.
const maxDepth = 10000

// Level is how much a reader may see.
type Level int

// Levels.
const (
	// Secrets hides credentials and card data: what nobody needs to fix a
	// message (operators).
	Secrets Level = iota
	// Personal also hides personal data: names, email, phone, addresses,
	// bank account numbers and IBANs, identity numbers (viewers).
	Personal
)

// sensitive are the key names, as word sequences, whose values are always
// hidden. A key matches when its words contain one of these sequences.
func sensitive() [][]string {
	return [][]string{
		{"card"}, {"card", "number"}, {"cvc"}, {"cvv"}, {"authorization", "code"},
		{"token"}, {"secret"}, {"password"}, {"api", "key"}, {"apikey"}, {"private", "key"},
		{"authorization"}, {"signature"},
	}
}

// personal are the key names hidden at the Personal level as well.
func personal() [][]string {
	return [][]string{
		{"email"}, {"phone"}, {"name"}, {"address"}, {"iban"}, {"account", "number"},
		{"routing", "number"}, {"bank", "account"}, {"bvn"}, {"birth"}, {"dob"}, {"ssn"},
		{"tax", "id"}, {"national", "id"},
	}
}

// cardOnly are the key names sensitive inside card objects.
func cardOnly() [][]string { return [][]string{{"number"}, {"exp", "month"}, {"exp", "year"}} }

// JSON returns doc with every value hidden at level replaced by
// Placeholder. It fails when doc is not one valid JSON value.
func JSON(doc []byte, level Level) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	root, err := parse(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("parse json: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("parse json: trailing data after the value")
	}
	scrub(root, false, level)
	var out bytes.Buffer
	if err := root.encode(&out); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// SensitiveKey reports whether the value of key is always hidden.
func SensitiveKey(key string) bool { return matches(words(key), sensitive()) }

// hidden reports whether the value of a key with words w is hidden at level.
func hidden(w []string, level Level) bool {
	return matches(w, sensitive()) || (level >= Personal && matches(w, personal()))
}

// node is a parsed JSON value that keeps object key order (a map would not).
type node struct {
	kind   byte // '{', '[' or 0 for a scalar
	keys   []string
	vals   []*node
	scalar any // string, json.Number, bool or nil
}

func parse(dec *json.Decoder, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return &node{scalar: tok}, nil
	}
	n := &node{kind: byte(d)} //nolint:gosec // G115: a json.Delim is one of the ASCII runes { } [ ]
	for dec.More() {
		if n.kind == '{' {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, ok := kt.(string)
			if !ok {
				return nil, errors.New("object key is not a string")
			}
			n.keys = append(n.keys, key)
		}
		v, err := parse(dec, depth+1)
		if err != nil {
			return nil, err
		}
		n.vals = append(n.vals, v)
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return nil, err
	}
	return n, nil
}

// scrub redacts n in place; inCard is true inside a card object.
func scrub(n *node, inCard bool, level Level) {
	switch n.kind {
	case '[':
		for _, v := range n.vals {
			scrub(v, inCard, level)
		}
	case '{':
		inCard = inCard || n.isCardObject()
		for i, key := range n.keys {
			w := words(key)
			if hidden(w, level) || (inCard && matches(w, cardOnly())) {
				n.vals[i] = &node{scalar: Placeholder}
				continue
			}
			if key == "raw" && scrubEmbedded(n.vals[i], level) {
				continue
			}
			scrub(n.vals[i], inCard || (len(w) > 0 && w[len(w)-1] == "cards"), level)
		}
	}
}

// scrubEmbedded redacts a JSON document carried as a string (a PSP payload
// stored as text) and reports whether v was one.
func scrubEmbedded(v *node, level Level) bool {
	s, ok := v.scalar.(string)
	if !ok || v.kind != 0 {
		return false
	}
	trimmed := strings.TrimSpace(s)
	if trimmed == "" || (trimmed[0] != '{' && trimmed[0] != '[') {
		return false
	}
	out, err := JSON([]byte(trimmed), level)
	if err != nil {
		// Text that only looks like JSON: hide it rather than guess.
		v.scalar = Placeholder
		return true
	}
	v.scalar = string(out)
	return true
}

func (n *node) isCardObject() bool {
	for i, k := range n.keys {
		if k == "object" {
			if s, ok := n.vals[i].scalar.(string); ok && strings.EqualFold(s, "card") {
				return true
			}
		}
	}
	return false
}

func (n *node) encode(w *bytes.Buffer) error {
	switch n.kind {
	case '{', '[':
		w.WriteByte(n.kind)
		for i, v := range n.vals {
			if i > 0 {
				w.WriteByte(',')
			}
			if n.kind == '{' {
				if err := encodeScalar(w, n.keys[i]); err != nil {
					return err
				}
				w.WriteByte(':')
			}
			if err := v.encode(w); err != nil {
				return err
			}
		}
		if n.kind == '{' {
			w.WriteByte('}')
		} else {
			w.WriteByte(']')
		}
		return nil
	default:
		return encodeScalar(w, n.scalar)
	}
}

func encodeScalar(w *bytes.Buffer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	w.Truncate(w.Len() - 1) // Encode's newline
	return nil
}

// words splits a key into lower-case words at '_', '-', '.', spaces and
// camelCase boundaries: "x-paystack-signature" → [x paystack signature],
// "accountNumber" → [account number].
func words(key string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, string(cur))
			cur = cur[:0]
		}
	}
	rs := []rune(key)
	for i, r := range rs {
		switch {
		case r == '_' || r == '-' || r == '.' || unicode.IsSpace(r):
			flush()
		case unicode.IsUpper(r):
			if i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])) {
				flush()
			}
			cur = append(cur, unicode.ToLower(r))
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return out
}

// matches reports whether w contains one of seqs as consecutive words.
func matches(w []string, seqs [][]string) bool {
	for _, seq := range seqs {
		for i := 0; i+len(seq) <= len(w); i++ {
			hit := true
			for j, s := range seq {
				if w[i+j] != s {
					hit = false
					break
				}
			}
			if hit {
				return true
			}
		}
	}
	return false
}
