package psp_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigFromEnvDefaults(t *testing.T) {
	cfg, err := psp.ConfigFromEnv(envOf(nil))
	require.NoError(t, err)
	require.Equal(t, psp.DefaultAddr, cfg.Addr)
	require.Equal(t, 2*time.Second, cfg.SettleDelay)
	require.Equal(t, psp.DefaultWebhookMaxAttempts, cfg.WebhookMaxAttempts)
	require.Equal(t, time.Second, cfg.WebhookBackoff)
	require.Empty(t, cfg.StripeWebhookURL)
	require.Empty(t, cfg.Faults.Next)
	require.Nil(t, cfg.Balances, "the default balances")
}

func TestConfigFromEnvAll(t *testing.T) {
	cfg, err := psp.ConfigFromEnv(envOf(map[string]string{
		psp.EnvAddr:                "127.0.0.1:0",
		psp.EnvSeed:                "-12",
		psp.EnvFaults:              `{"provider":"stripe","error_rate":0.1,"next":[{"kind":"429","count":2}]}`,
		psp.EnvStripeWebhookURL:    "http://127.0.0.1:8080/webhooks/stripe",
		psp.EnvStripeWebhookSecret: " whsec_new , whsec_old",
		psp.EnvPaystackWebhookURL:  "http://127.0.0.1:8080/webhooks/paystack",
		psp.EnvPaystackSecretKey:   "sk_test_ps",
		psp.EnvSettleDelay:         "0",
		psp.EnvWebhookMaxAttempts:  "3",
		psp.EnvWebhookBackoff:      "250ms",
		psp.EnvIdempotencyWindow:   "90m",
		psp.EnvBalances:            "usd=500, NGN=7",
	}))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:0", cfg.Addr)
	require.Equal(t, uint64(0xfffffffffffffff4), cfg.Seed)
	require.Equal(t, "stripe", cfg.Faults.Provider)
	require.InDelta(t, 0.1, cfg.Faults.ErrorRate, 1e-9)
	require.Equal(t, []psp.NextFault{{Kind: psp.Fault429, Count: 2}}, cfg.Faults.Next)
	require.Equal(t, "whsec_new", cfg.StripeWebhookSecret, "signs with the first secret")
	require.Equal(t, "sk_test_ps", cfg.PaystackSecretKey)
	require.Zero(t, cfg.SettleDelay, "0 means never auto-settle")
	require.Equal(t, 3, cfg.WebhookMaxAttempts)
	require.Equal(t, 250*time.Millisecond, cfg.WebhookBackoff)
	require.Equal(t, 90*time.Minute, cfg.IdempotencyWindow)
	require.Equal(t, map[string]int64{"usd": 500, "ngn": 7}, cfg.Balances)

	_, err = psp.New(cfg, nil)
	require.NoError(t, err)
}

func TestConfigFromEnvErrorsNameTheVariable(t *testing.T) {
	cases := map[string]map[string]string{
		psp.EnvSeed:                {psp.EnvSeed: "abc"},
		psp.EnvFaults:              {psp.EnvFaults: `{"error_rate":2}`},
		psp.EnvSettleDelay:         {psp.EnvSettleDelay: "soon"},
		psp.EnvIdempotencyWindow:   {psp.EnvIdempotencyWindow: "a day"},
		psp.EnvWebhookMaxAttempts:  {psp.EnvWebhookMaxAttempts: "0"},
		psp.EnvWebhookBackoff:      {psp.EnvWebhookBackoff: "-1s"},
		psp.EnvStripeWebhookURL:    {psp.EnvStripeWebhookURL: "localhost:8080/x", psp.EnvStripeWebhookSecret: "whsec"},
		psp.EnvStripeWebhookSecret: {psp.EnvStripeWebhookURL: "http://127.0.0.1:1/x"},
		psp.EnvPaystackSecretKey:   {psp.EnvPaystackWebhookURL: "http://127.0.0.1:1/x"},
		psp.EnvBalances:            {psp.EnvBalances: "usd=lots"},
	}
	for name, env := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := psp.ConfigFromEnv(envOf(env))
			require.Error(t, err)
			require.Contains(t, err.Error(), name)
		})
	}
}

func TestNewValidatesConfig(t *testing.T) {
	_, err := psp.New(psp.Config{StripeWebhookURL: "http://127.0.0.1:1/x"}, nil)
	require.Error(t, err)
	_, err = psp.New(psp.Config{Faults: psp.FaultSpec{ErrorRate: -1}}, nil)
	require.Error(t, err)
	_, err = psp.New(psp.Config{SettleDelay: -time.Second}, nil)
	require.Error(t, err)
	_, err = psp.New(psp.Config{Balances: map[string]int64{"usd": -1}}, nil)
	require.Error(t, err)
	_, err = psp.New(psp.Config{Balances: map[string]int64{"dollars": 1}}, nil)
	require.Error(t, err)
}

func TestDurationJSON(t *testing.T) {
	spec, err := psp.ParseFaultSpec([]byte(`{"timeout":2.5,"latency":"15ms"}`))
	require.NoError(t, err)
	require.Equal(t, psp.Duration(2500*time.Millisecond), spec.Timeout)
	require.Equal(t, psp.Duration(15*time.Millisecond), spec.Latency)
	b, err := psp.Duration(1500 * time.Millisecond).MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, `"1.5s"`, string(b))
}

// The stand-in never runs with production secrets: a live-looking key in
// one of its secrets, or in the services' PSP secrets should its
// environment hold them, stops it, naming the variable but not the key.
func TestConfigFromEnvRefusesLiveKeys(t *testing.T) {
	for name, key := range map[string]string{
		psp.EnvPaystackSecretKey:   "sk_live_0123456789abcdef",
		psp.EnvStripeWebhookSecret: "whsec_test, sk_live_0123456789",
		"STRIPE_SECRET_KEY":        "rk_live_51Habcdef0123456789",
		"PAYSTACK_SECRET_KEY":      "sk_live_paystack0123456789",
		"STRIPE_WEBHOOK_SECRET":    "pk_live_0123456789",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := psp.ConfigFromEnv(envOf(map[string]string{name: key}))
			require.Error(t, err)
			require.Contains(t, err.Error(), name)
			require.Contains(t, err.Error(), "live")
			require.NotContains(t, err.Error(), key)
		})
	}
	// Test keys, and the services' variables with test keys, are fine.
	_, err := psp.ConfigFromEnv(envOf(map[string]string{
		psp.EnvPaystackSecretKey: "sk_test_ps", "STRIPE_SECRET_KEY": "sk_test_x", "PAYSTACK_SECRET_KEY": "sk_test_y",
	}))
	require.NoError(t, err)
	require.Equal(t, "PSP_PAYSTACK_SECRET_KEY", psp.EnvPaystackSecretKey, "the stand-in's own variable, not the services'")
	require.Equal(t, "PSP_STRIPE_WEBHOOK_SECRET", psp.EnvStripeWebhookSecret, "the stand-in's own variable, not the services'")
}

func TestLiveKey(t *testing.T) {
	for key, live := range map[string]bool{
		"sk_live_abc": true, "rk_live_abc": true, "pk_live_abc": true,
		"sk_test_abc": false, "rk_test_abc": false, "whsec_abc": false, "": false,
	} {
		require.Equal(t, live, psp.LiveKey(key), key)
	}
}
