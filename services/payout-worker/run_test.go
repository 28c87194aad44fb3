package main

import (
	"testing"
	"time"
)

// The Stripe mode outcome events must match follows the key; the PSP's
// idempotency window is 23h unless configured.
func TestReadConfigEvidenceSettings(t *testing.T) {
	cases := []struct {
		env  map[string]string
		live bool
		win  time.Duration
	}{
		{map[string]string{"STRIPE_SECRET_KEY": "sk_test_x"}, false, 23 * time.Hour},
		{map[string]string{"STRIPE_SECRET_KEY": "sk_live_x"}, true, 23 * time.Hour},
		{map[string]string{"STRIPE_SECRET_KEY": "rk_live_x", "PSP_IDEMPOTENCY_WINDOW": "2h"}, true, 2 * time.Hour},
		{map[string]string{}, false, 23 * time.Hour},
	}
	for _, tc := range cases {
		cfg, err := readConfig(func(k string) string { return tc.env[k] })
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		if cfg.Payout.StripeLivemode != tc.live || cfg.Payout.IdempotencyWindow != tc.win {
			t.Errorf("%v: livemode %t window %s, want %t %s", tc.env, cfg.Payout.StripeLivemode,
				cfg.Payout.IdempotencyWindow, tc.live, tc.win)
		}
	}
	if _, err := readConfig(func(k string) string {
		return map[string]string{"PSP_IDEMPOTENCY_WINDOW": "0s"}[k]
	}); err == nil {
		t.Error("a zero idempotency window must be refused")
	}
}
