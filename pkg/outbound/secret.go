package outbound

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// SecretPrefix starts every endpoint secret (the Standard Webhooks form).
const SecretPrefix = "whsec_"

// secretBytes is the key length of a new secret: the HMAC-SHA256 block
// holds 64, 32 is what the specification's own libraries generate.
const secretBytes = 32

// minSecretBytes refuses a key an attacker could guess.
const minSecretBytes = 24

// ErrSecret is a secret that is not "whsec_" and the base64 of at least 24
// bytes.
var ErrSecret = errors.New("an endpoint secret is whsec_ followed by the base64 of at least 24 random bytes")

// NewSecret returns a new random endpoint secret.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("new endpoint secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// ParseSecret returns the key of secret, or ErrSecret.
func ParseSecret(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, ErrSecret
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) < minSecretBytes {
		return nil, ErrSecret
	}
	return key, nil
}
