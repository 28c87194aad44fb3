package main

import (
	"strings"
	"testing"
)

// Every refused value is reported under the variable the operator set, not
// under the Go field the domain package validated.
func TestReadConfigErrorsNameTheVariable(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"PSP_BACKOFF_BASE": "0s"}, "PSP_BACKOFF_BASE must be positive"},
		{map[string]string{"PSP_BACKOFF_MULTIPLIER": "0.5"}, "PSP_BACKOFF_MULTIPLIER must be at least 1"},
		{map[string]string{"PSP_BACKOFF_BASE": "2m", "PSP_BACKOFF_MAX": "1m"}, "PSP_BACKOFF_MAX must be at least PSP_BACKOFF_BASE"},
		{map[string]string{"PSP_MAX_ATTEMPTS": "0"}, "PSP_MAX_ATTEMPTS must be at least 1"},
		{map[string]string{"PSP_BREAKER_DEFER": "-1s"}, "PSP_BREAKER_DEFER must be positive"},
		{map[string]string{"PSP_CALL_TIMEOUT": "0s"}, "PSP_CALL_TIMEOUT must be positive"},
		{map[string]string{"PSP_IDEMPOTENCY_WINDOW": "0s"}, "PSP_IDEMPOTENCY_WINDOW must be positive"},
		{map[string]string{"PSP_SETTLE_WINDOW": "10s"}, "PSP_SETTLE_WINDOW (10s) must exceed PSP_CALL_TIMEOUT (30s)"},
		{map[string]string{"BREAKER_FAILURES": "0"}, "BREAKER_FAILURES must be at least 1"},
		// A negative count once wrapped around to 4294967295 and passed.
		{map[string]string{"BREAKER_FAILURES": "-1"}, "BREAKER_FAILURES must be a whole number"},
		{map[string]string{"BREAKER_OPEN_FOR": "0s", "PSP_BREAKER_DEFER": "1s"}, "BREAKER_OPEN_FOR must be positive"},
		{map[string]string{"WALLET_LOCK_EXPIRY": "10ms"}, "WALLET_LOCK_EXPIRY must be at least 1s"},
		{map[string]string{"WORKER_CONCURRENCY": "0"}, "WORKER_CONCURRENCY must be at least 1"},
	} {
		_, err := readConfig(withEventKey(func(k string) string { return tc.env[k] }))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to say %q", tc.env, err, tc.want)
			continue
		}
		// A Go field path ("Backoff.Base", "SettleWindow") means a field the
		// config layer did not map to its variable.
		for _, field := range []string{"Backoff.", "BreakerDefer", "CallTimeout", "IdempotencyWindow", "SettleWindow",
			"ConsecutiveFailures", "OpenFor", "HalfOpenProbes"} {
			if strings.Contains(err.Error(), field) {
				t.Errorf("%v: error %q names Go field %s instead of its variable", tc.env, err, field)
			}
		}
	}
}
