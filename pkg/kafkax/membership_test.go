package kafkax_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/kafkax"
)

func TestReadMembership(t *testing.T) {
	env := func(vars map[string]string) *config.Env { return config.New(func(k string) string { return vars[k] }) }

	e := env(nil)
	m := kafkax.ReadMembership(e)
	require.NoError(t, e.Err())
	require.Equal(t, kafkax.Membership{SessionTimeout: 10 * time.Second}, m, "a crashed replica must not stall its group for franz-go's 45s")
	require.Len(t, m.Opts(), 1)

	e = env(map[string]string{"KAFKA_SESSION_TIMEOUT": "30s", "KAFKA_GROUP_INSTANCE_ID": "payout-worker-0"})
	m = kafkax.ReadMembership(e)
	require.NoError(t, e.Err())
	require.Equal(t, kafkax.Membership{SessionTimeout: 30 * time.Second, InstanceID: "payout-worker-0"}, m)
	require.Len(t, m.Opts(), 2)

	for _, bad := range []string{"1s", "2h", "soon"} {
		e = env(map[string]string{"KAFKA_SESSION_TIMEOUT": bad})
		kafkax.ReadMembership(e)
		require.ErrorContains(t, e.Err(), "KAFKA_SESSION_TIMEOUT", bad)
	}
}
