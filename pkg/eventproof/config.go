package eventproof

import "github.com/aegis-payments/aegis/pkg/config"

// Environment variables of the event signing key (webhook-api signs with
// it, payout-worker verifies with it; no other service holds it).
const (
	EnvKey         = "AEGIS_EVENT_SIGNING_KEY"
	EnvPreviousKey = "AEGIS_EVENT_SIGNING_KEY_PREVIOUS"
)

// Read reads the keys from env; both services refuse to start without a
// key (an error naming the variable is recorded in env), since without it
// webhook-api's money events would all be refused by the worker. The
// values are never quoted in errors.
func Read(env *config.Env) *Keys {
	current, _ := env.Lookup(EnvKey)
	previous, _ := env.Lookup(EnvPreviousKey)
	if current == "" {
		env.Errorf("%s is required: the key proving to payout-worker that webhook-api verified a money event", EnvKey)
		return nil
	}
	if len(current) < MinKeyLen {
		env.Errorf("%s must be at least %d bytes", EnvKey, MinKeyLen)
		return nil
	}
	if previous != "" && len(previous) < MinKeyLen {
		env.Errorf("%s must be at least %d bytes when set", EnvPreviousKey, MinKeyLen)
		return nil
	}
	k, err := New(current, previous)
	if err != nil {
		env.Errorf("%s: %v", EnvKey, err)
		return nil
	}
	return k
}
