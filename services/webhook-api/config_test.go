package main

import (
	"strings"
	"testing"
)

// Every refused value is reported under the variable the operator set.
func TestReadConfigErrorsNameTheVariable(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"DB_MAX_CONNS": "0"}, "DB_MAX_CONNS must be at least 1"},
		{map[string]string{"DB_MAX_CONNS": "many"}, "DB_MAX_CONNS must be an integer"},
		{map[string]string{"INGEST_COMMIT_WORKERS": "16"}, "INGEST_COMMIT_WORKERS must be at least 1 and below DB_MAX_CONNS"},
		{map[string]string{"INGEST_COMMIT_GROUP": "0"}, "INGEST_COMMIT_GROUP must be at least 1"},
		{map[string]string{"API_TOKENS": "no-colons"}, "API_TOKENS: "},
		{map[string]string{"PAYOUT_MAX_AMOUNT": "lots"}, "PAYOUT_MAX_AMOUNT: "},
		{map[string]string{"PAYOUT_DAILY_MAX": "lots"}, "PAYOUT_DAILY_MAX: "},
		{map[string]string{"DESTINATION_NEW_MAX": "usd"}, "DESTINATION_NEW_MAX: "},
		{map[string]string{"DESTINATION_COOLING_OFF": "-1h"}, "DESTINATION_COOLING_OFF must not be negative"},
		{map[string]string{"SHUTDOWN_GRACE": "0s"}, "SHUTDOWN_GRACE must be positive"},
		{map[string]string{"HTTP_ADDR": "8080"}, "HTTP_ADDR must be host:port"},
		{map[string]string{"PSP_RECONCILE_INTERVAL": "-1m"}, "PSP_RECONCILE_INTERVAL must not be negative"},
		{map[string]string{"PSP_RECONCILE_INTERVAL": "500ms"}, "PSP_RECONCILE_INTERVAL must be 0 (no schedule) or at least 1s"},
		{map[string]string{"PSP_RECONCILE_WINDOW": "0s"}, "PSP_RECONCILE_WINDOW must be positive"},
		{map[string]string{"PSP_RECONCILE_OVERLAP": "-1s"}, "PSP_RECONCILE_OVERLAP must not be negative"},
		{map[string]string{"PSP_RECONCILE_GRACE": "-1s"}, "PSP_RECONCILE_GRACE must not be negative"},
		{map[string]string{"PSP_RECONCILE_BALANCE_TOLERANCE": "-1"}, "PSP_RECONCILE_BALANCE_TOLERANCE must not be negative"},
		{map[string]string{"PSP_RECONCILE_RUN_TIMEOUT": "0s"}, "PSP_RECONCILE_RUN_TIMEOUT must be at least 1s"},
		// Given the worker's wait too (the shared configuration), a wait
		// that ends before a run could recover the payment is refused here too.
		{map[string]string{"PSP_RECONCILE_INTERVAL": "1h", "MONEY_BACK_CREDIT_WAIT": "1h"},
			"MONEY_BACK_CREDIT_WAIT 1h0m0s is shorter than PSP_RECONCILE_INTERVAL 1h0m0s"},
		{map[string]string{"WEBHOOK_READING_MAX_MIB": "1"}, "WEBHOOK_READING_MAX_MIB must be at least 2"},
		{map[string]string{"WEBHOOK_READING_MAX_MIB": "lots"}, "WEBHOOK_READING_MAX_MIB must be an integer"},
	} {
		_, err := readConfig(withEventKey(func(k string) string { return tc.env[k] }))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to say %q", tc.env, err, tc.want)
		}
	}
	if _, err := readConfig(withEventKey(func(string) string { return "" })); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
}

// webhook-api runs Go code on one thread on a host of two cores or fewer,
// unless GOMAXPROCS says otherwise.
func TestSmallHostProcs(t *testing.T) {
	for _, tc := range []struct {
		env   string
		cores int
		want  int
	}{
		{"", 1, 1},
		{"", 2, 1},
		{"", 3, 0},
		{"", 8, 0},
		{"2", 2, 0},
		{"1", 8, 0},
	} {
		if got := smallHostProcs(tc.env, tc.cores); got != tc.want {
			t.Errorf("GOMAXPROCS=%q, %d cores: chose %d, want %d", tc.env, tc.cores, got, tc.want)
		}
	}
}

// webhook-api collects garbage at GOGC=400 unless GOGC says otherwise
// (off included).
func TestDefaultGCPercent(t *testing.T) {
	for env, want := range map[string]int{"": 400, "100": 0, "off": 0, "50": 0} {
		if got := defaultGCPercent(env); got != want {
			t.Errorf("GOGC=%q: chose %d, want %d", env, got, want)
		}
	}
}
