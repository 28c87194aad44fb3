package main

import (
	"strings"
	"testing"
)

// Every refused value is reported under the variable the operator set, not
// under the Go field a domain package validated.
func TestReadConfigErrorsNameTheVariable(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"STALL_AFTER": "0s"}, "STALL_AFTER must be positive"},
		{map[string]string{"STALL_CHECK_INTERVAL": "-1s"}, "STALL_CHECK_INTERVAL must be positive"},
		{map[string]string{"DLQ_STORE_RETRY_FOR": "0s"}, "DLQ_STORE_RETRY_FOR must be positive"},
		{map[string]string{"DLQ_CHECK_INTERVAL": "0s"}, "DLQ_CHECK_INTERVAL must be positive"},
		{map[string]string{"DLQ_DEPTH_ALERT_THRESHOLD": "0"}, "DLQ_DEPTH_ALERT_THRESHOLD must be at least 1"},
		{map[string]string{"REPLAY_RATE": "0"}, "REPLAY_RATE must be between 0.1 and 10000"},
		{map[string]string{"RECONCILE_INTERVAL": "1ms"}, "RECONCILE_INTERVAL must be at least 1s"},
		{map[string]string{"RECONCILE_STATEMENT_TIMEOUT": "1ms"}, "RECONCILE_STATEMENT_TIMEOUT must be at least 1s"},
		{map[string]string{"KAFKA_BROKERS": "nohost"}, "KAFKA_BROKERS must be comma-separated host:port"},
		{map[string]string{"ALERT_DEDUPE_WINDOW": "5m"}, "ALERT_DEDUPE_WINDOW was removed"},
		{map[string]string{"SECOND_APPROVER_RESOLUTION_AMOUNT": "-1"}, "SECOND_APPROVER_RESOLUTION_AMOUNT must be 0 or more"},
		{map[string]string{"DLQ_ADMIN_TOKENS": "ana:operator:0123456789abcdef", "DLQ_ADMIN_TOKEN_PERSONS": "anna=ana"},
			"DLQ_ADMIN_TOKEN_PERSONS: entry 1: \"anna\" is not the name of a configured token"},
		{map[string]string{"OUTBOUND_ROTATION_OVERLAP": "1ms"}, "OUTBOUND_ROTATION_OVERLAP must be at least 1s"},
		{map[string]string{"OUTBOUND_RECOVER_RATE": "0"}, "OUTBOUND_RECOVER_RATE must be between 1 and 10000"},
		{map[string]string{"OUTBOUND_ALLOW_HTTP": "sometimes"}, "OUTBOUND_ALLOW_HTTP must be true or false"},
		{map[string]string{"ERASURE_KEY": "short"}, "ERASURE_KEY must be at least 32 bytes"},
	} {
		_, err := readConfig(func(k string) string { return tc.env[k] })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to say %q", tc.env, err, tc.want)
			continue
		}
		for _, field := range []string{"Groups", "After ", "Interval must", "CheckInterval", "DepthThreshold", "RotationOverlap", "RecoverRate"} {
			if strings.Contains(err.Error(), field) {
				t.Errorf("%v: error %q names Go field %s instead of its variable", tc.env, err, field)
			}
		}
	}
}
