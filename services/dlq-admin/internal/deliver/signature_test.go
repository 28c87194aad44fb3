package deliver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deliver"
)

// The documented recipe, checked against a fixed vector: a receiver in any
// language computing HMAC-SHA256("<t>.<body>") gets this hex.
func TestSignatureFormatAndTolerance(t *testing.T) {
	t.Parallel()
	at := time.Unix(1795000000, 0)
	body := []byte(`{"event_id":"e1"}`)
	sig := deliver.Sign("whsec_0123456789abcdef", at, body)
	// printf '%s' '1795000000.{"event_id":"e1"}' | openssl dgst -sha256 -hmac whsec_0123456789abcdef
	require.Equal(t, "t=1795000000,v1=7aa0e218a793df135347ac756f4e72ad7240e507f8995174cb04312455e9505e", sig)

	for name, tc := range map[string]struct {
		header string
		now    time.Time
		ok     bool
	}{
		"fresh":                    {sig, at.Add(time.Minute), true},
		"too old":                  {sig, at.Add(6 * time.Minute), false},
		"from the future":          {sig, at.Add(-6 * time.Minute), false},
		"rotation: second v1 good": {"t=1795000000,v1=00ff," + sig[len("t=1795000000,"):], at, true},
		"no timestamp":             {sig[len("t=1795000000,"):], at, false},
		"no signature":             {"t=1795000000", at, false},
		"timestamp moved":          {"t=1795000001," + sig[len("t=1795000000,"):], at, false},
	} {
		err := deliver.Verify("whsec_0123456789abcdef", tc.header, body, 5*time.Minute, tc.now)
		if tc.ok {
			require.NoError(t, err, name)
		} else {
			require.ErrorIs(t, err, deliver.ErrSignature, name)
		}
	}
}
