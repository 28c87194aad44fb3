package main

import (
	"strings"
	"testing"
)

// Every refused value is reported under the variable the operator set, not
// under the Go field the relay validated.
func TestReadConfigErrorsNameTheVariable(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"RELAY_WORKERS": "0"}, "RELAY_WORKERS must be at least 1"},
		{map[string]string{"RELAY_BATCH_SIZE": "0"}, "RELAY_BATCH_SIZE must be at least 1"},
		{map[string]string{"RELAY_POLL_INTERVAL": "0s"}, "RELAY_POLL_INTERVAL must be positive"},
		{map[string]string{"RELAY_PUBLISH_TIMEOUT": "0s"}, "RELAY_PUBLISH_TIMEOUT must be positive"},
		{map[string]string{"RELAY_LEASE": "20s"}, "RELAY_LEASE (20s) must be at least twice RELAY_PUBLISH_TIMEOUT (15s)"},
		// Removed: the relay keeps no published row, and says so rather
		// than ignore a retention a deployment still expects.
		{map[string]string{"RELAY_RETENTION": "24h"}, "RELAY_RETENTION was removed"},
		{map[string]string{"RELAY_BACKOFF_BASE": "0s"}, "RELAY_BACKOFF_BASE must be positive"},
		{map[string]string{"RELAY_BACKOFF_MULTIPLIER": "0"}, "RELAY_BACKOFF_MULTIPLIER must be at least 1"},
		{map[string]string{"RELAY_BACKOFF_MAX": "1ms"}, "RELAY_BACKOFF_MAX must be at least RELAY_BACKOFF_BASE"},
		{map[string]string{"BREAKER_FAILURES": "0"}, "BREAKER_FAILURES must be at least 1"},
		// A negative count once wrapped around to 4294967295 and passed.
		{map[string]string{"BREAKER_FAILURES": "-1"}, "BREAKER_FAILURES must be a whole number"},
		{map[string]string{"BREAKER_OPEN_FOR": "-1s"}, "BREAKER_OPEN_FOR must be positive"},
		{map[string]string{"RELAY_POLL_INTERVAL": "soon"}, "RELAY_POLL_INTERVAL must be a duration"},
		{map[string]string{"OUTBOUND_SENDERS": "0"}, "OUTBOUND_SENDERS must be at least 1"},
		{map[string]string{"OUTBOUND_PER_ENDPOINT": "0"}, "OUTBOUND_PER_ENDPOINT must be at least 1"},
		{map[string]string{"OUTBOUND_POLL_INTERVAL": "0s"}, "OUTBOUND_POLL_INTERVAL must be positive"},
		{map[string]string{"OUTBOUND_LEASE": "10s"}, "OUTBOUND_LEASE must exceed OUTBOUND_TIMEOUT (15s)"},
		{map[string]string{"OUTBOUND_TIMEOUT": "1m", "OUTBOUND_LEASE": "1m"}, "OUTBOUND_LEASE must exceed OUTBOUND_TIMEOUT (1m0s)"},
		{map[string]string{"OUTBOUND_RETRY_SCHEDULE": "5s,soon"}, `OUTBOUND_RETRY_SCHEDULE: "soon" is not a duration`},
		{map[string]string{"OUTBOUND_RETRY_SCHEDULE": ","}, "OUTBOUND_RETRY_SCHEDULE must list at least one delay"},
		{map[string]string{"OUTBOUND_RETRY_SCHEDULE": "5s,-1s"}, "OUTBOUND_RETRY_SCHEDULE delays must be positive"},
		{map[string]string{"OUTBOUND_DISABLE_AFTER": "0s"}, "OUTBOUND_DISABLE_AFTER must be positive"},
		{map[string]string{"OUTBOUND_HEALTH_INTERVAL": "0s"}, "OUTBOUND_HEALTH_INTERVAL must be positive"},
		// 27h35m of retries + 120h of failing: a shorter retention could not
		// be recovered from.
		{map[string]string{"OUTBOUND_LOG_RETENTION": "140h"}, "OUTBOUND_LOG_RETENTION must exceed the retry schedule plus the disable window (147h35m5s)"},
		{map[string]string{"OUTBOUND_MESSAGE_RETENTION": "24h"}, "OUTBOUND_MESSAGE_RETENTION must exceed the retry schedule plus the disable window"},
		{map[string]string{"OUTBOUND_ALLOW_HTTP": "maybe"}, "OUTBOUND_ALLOW_HTTP"},
		{map[string]string{"KAFKA_SESSION_TIMEOUT": "1s"}, "KAFKA_SESSION_TIMEOUT must be between 6s and 30m"},
	} {
		_, err := readConfig(func(k string) string { return tc.env[k] })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to say %q", tc.env, err, tc.want)
			continue
		}
		for _, field := range []string{"Backoff.", "BatchSize", "PollInterval", "PublishTimeout", "Lease ", "Retention",
			"ConsecutiveFailures", "OpenFor", "Senders", "PerEndpoint", "Schedule", "DisableAfter", "HealthInterval"} {
			if strings.Contains(err.Error(), field) {
				t.Errorf("%v: error %q names Go field %s instead of its variable", tc.env, err, field)
			}
		}
	}
	if _, err := readConfig(func(string) string { return "" }); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
}
