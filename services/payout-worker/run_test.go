package main

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Every goroutine run started (consumer, HTTP, notifier, alerts) has
// returned when it does.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
		cfg, err := readConfig(withEventKey(func(k string) string { return tc.env[k] }))
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		if cfg.Payout.StripeLivemode != tc.live || cfg.Payout.IdempotencyWindow != tc.win {
			t.Errorf("%v: livemode %t window %s, want %t %s", tc.env, cfg.Payout.StripeLivemode,
				cfg.Payout.IdempotencyWindow, tc.live, tc.win)
		}
	}
	if _, err := readConfig(withEventKey(func(k string) string {
		return map[string]string{"PSP_IDEMPOTENCY_WINDOW": "0s"}[k]
	})); err == nil {
		t.Error("a zero idempotency window must be refused")
	}
}

// PSP_SETTLE_WINDOW defaults to 2m and must exceed PSP_CALL_TIMEOUT: a
// request we stopped waiting for may still be executing at the PSP.
func TestReadConfigSettleWindow(t *testing.T) {
	cfg, err := readConfig(withEventKey(func(string) string { return "" }))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Payout.SettleWindow != 2*time.Minute || cfg.Payout.SettleWindow <= cfg.Payout.CallTimeout {
		t.Errorf("default settle window %s (call timeout %s)", cfg.Payout.SettleWindow, cfg.Payout.CallTimeout)
	}
	for _, env := range []map[string]string{
		{"PSP_SETTLE_WINDOW": "30s"},
		{"PSP_SETTLE_WINDOW": "1m", "PSP_CALL_TIMEOUT": "90s"},
	} {
		_, err := readConfig(withEventKey(func(k string) string { return env[k] }))
		if err == nil || !strings.Contains(err.Error(), "PSP_SETTLE_WINDOW") {
			t.Errorf("%v: want PSP_SETTLE_WINDOW refused, got %v", env, err)
		}
	}
	cfg, err = readConfig(withEventKey(func(k string) string {
		return map[string]string{"PSP_SETTLE_WINDOW": "5s", "PSP_CALL_TIMEOUT": "1s"}[k]
	}))
	if err != nil || cfg.Payout.SettleWindow != 5*time.Second {
		t.Errorf("settle window 5s: %v %v", cfg.Payout.SettleWindow, err)
	}
}
