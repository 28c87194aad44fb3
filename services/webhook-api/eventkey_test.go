package main

import "github.com/aegis-payments/aegis/pkg/eventproof"

// withEventKey is getenv with AEGIS_EVENT_SIGNING_KEY set to a test key
// when getenv has none: every service configuration needs one.
func withEventKey(getenv func(string) string) func(string) string {
	return func(k string) string {
		if v := getenv(k); v != "" || k != eventproof.EnvKey {
			return v
		}
		return "test-event-signing-key-0123456789abcdef"
	}
}
