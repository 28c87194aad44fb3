package eventproof_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/eventproof"
)

// Both services refuse to start without a key, and say which variable.
func TestReadNamesTheVariable(t *testing.T) {
	t.Parallel()
	for env, want := range map[[2]string]string{
		{"", ""}:                     "AEGIS_EVENT_SIGNING_KEY is required",
		{"short-key", ""}:            "AEGIS_EVENT_SIGNING_KEY must be at least 32 bytes",
		{keyA, "short-previous-key"}: "AEGIS_EVENT_SIGNING_KEY_PREVIOUS must be at least 32 bytes",
	} {
		e := config.New(func(k string) string {
			return map[string]string{eventproof.EnvKey: env[0], eventproof.EnvPreviousKey: env[1]}[k]
		})
		require.Nil(t, eventproof.Read(e))
		require.ErrorContains(t, e.Err(), want)
		require.NotContains(t, e.Err().Error(), "short-")
	}
	e := config.New(func(k string) string {
		return map[string]string{eventproof.EnvKey: keyB, eventproof.EnvPreviousKey: keyA}[k]
	})
	k := eventproof.Read(e)
	require.NoError(t, e.Err())
	require.Equal(t, eventproof.KeyID(keyB), k.CurrentKeyID())
}
