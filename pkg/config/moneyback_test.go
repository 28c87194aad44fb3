package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/config"
)

func TestMoneyBackTiming(t *testing.T) {
	for _, c := range []struct {
		name           string
		env            map[string]string
		interval, wait time.Duration
		err            string
	}{
		{name: "defaults: the wait outlasts a reconciliation", env: nil,
			interval: 15 * time.Minute, wait: 15*time.Minute + 30*time.Minute + time.Minute},
		{name: "derived from the interval", env: map[string]string{"PSP_RECONCILE_INTERVAL": "1h"},
			interval: time.Hour, wait: time.Hour + 31*time.Minute},
		{name: "a longer wait is fine", env: map[string]string{"MONEY_BACK_CREDIT_WAIT": "2h"},
			interval: 15 * time.Minute, wait: 2 * time.Hour},
		{name: "on request only", env: map[string]string{"PSP_RECONCILE_INTERVAL": "0"}, wait: 30 * time.Second},
		{name: "on request only, at once", env: map[string]string{"PSP_RECONCILE_INTERVAL": "0", "MONEY_BACK_CREDIT_WAIT": "0"}},
		{name: "the old pair", env: map[string]string{"MONEY_BACK_CREDIT_WAIT": "30s"},
			err: "MONEY_BACK_CREDIT_WAIT 30s is shorter than PSP_RECONCILE_INTERVAL 15m0s plus PSP_RECONCILE_RUN_TIMEOUT 30m0s"},
		{name: "a shorter run timeout, scaled down", env: map[string]string{"PSP_RECONCILE_INTERVAL": "2s",
			"PSP_RECONCILE_RUN_TIMEOUT": "5s", "MONEY_BACK_CREDIT_WAIT": "68s"}, interval: 2 * time.Second, wait: 68 * time.Second},
		{name: "derived from a shorter run timeout", env: map[string]string{"PSP_RECONCILE_RUN_TIMEOUT": "5m"},
			interval: 15 * time.Minute, wait: 21 * time.Minute},
		{name: "run timeout too short", env: map[string]string{"PSP_RECONCILE_RUN_TIMEOUT": "10ms"},
			err: "PSP_RECONCILE_RUN_TIMEOUT must be at least 1s"},
		{name: "at once with a schedule", env: map[string]string{"MONEY_BACK_CREDIT_WAIT": "0"},
			err: "set it to at least 46m0s"},
		{name: "negative wait", env: map[string]string{"PSP_RECONCILE_INTERVAL": "0", "MONEY_BACK_CREDIT_WAIT": "-1s"},
			err: "MONEY_BACK_CREDIT_WAIT must not be negative"},
		{name: "negative interval", env: map[string]string{"PSP_RECONCILE_INTERVAL": "-1m"},
			err: "PSP_RECONCILE_INTERVAL must not be negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := config.New(func(k string) string { return c.env[k] })
			got := env.MoneyBackTiming()
			interval, wait := got.ReconcileInterval, got.CreditWait
			if c.err != "" {
				require.ErrorContains(t, env.Err(), c.err)
				return
			}
			require.NoError(t, env.Err())
			require.Equal(t, c.interval, interval)
			require.Equal(t, c.wait, wait)
		})
	}
}
