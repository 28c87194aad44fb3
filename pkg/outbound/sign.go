package outbound

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aegis-payments/aegis/pkg/hmacsig"
)

// Header names of a delivery (Standard Webhooks).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Signer signs deliveries with one or more keys (during a rotation's
// overlap, the new secret's and the old one's).
type Signer struct {
	keys [][]byte
}

// NewSigner parses secrets (whsec_…) into a Signer; at least one is needed.
func NewSigner(secrets ...string) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("signer: %w", ErrSecret)
	}
	s := &Signer{}
	for _, sec := range secrets {
		key, err := ParseSecret(sec)
		if err != nil {
			return nil, fmt.Errorf("signer: %w", err)
		}
		s.keys = append(s.keys, key)
	}
	return s, nil
}

// Sign returns the webhook-signature value for message id sent at t with
// body: "v1,<base64 HMAC-SHA256 of id.<unix seconds>.body>" per key,
// separated by spaces.
func (s *Signer) Sign(id string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	sigs := make([]string, 0, len(s.keys))
	for _, key := range s.keys {
		sigs = append(sigs, "v1,"+hmacsig.Base64(sha256.New, key, []byte(id+"."+ts+"."), body))
	}
	return strings.Join(sigs, " ")
}

// Headers returns the three Standard Webhooks headers of a delivery.
func (s *Signer) Headers(id string, t time.Time, body []byte) map[string]string {
	return map[string]string{
		HeaderID:        id,
		HeaderTimestamp: strconv.FormatInt(t.Unix(), 10),
		HeaderSignature: s.Sign(id, t, body),
	}
}
