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
//
//	AEGIS_EVENT_SIGNING_KEY           required, 32+ bytes, held only by webhook-api and payout-worker: webhook-api
//	                                  signs every money event it writes (HMAC-SHA256 over the event's fields,
//	                                  header aegis-event-proof) and the worker moves money only on a valid proof;
//	                                  anything else is dead-lettered as unproven_event and pages (critical)
//	AEGIS_EVENT_SIGNING_KEY_PREVIOUS  also accepted while the key is rotated: give the worker the new key with
//	                                  the old as previous, then webhook-api the new key, then drop the previous
//	                                  once no dead letter signed with it is left to replay
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
