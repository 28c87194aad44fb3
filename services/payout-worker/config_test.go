package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
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
		{map[string]string{"PAYOUT_CHECK_AFTER": "0s"}, "PAYOUT_CHECK_AFTER must be positive"},
		{map[string]string{"PAYOUT_DEADLINE_INITIALIZED": "1m"}, "PAYOUT_DEADLINE_INITIALIZED (1m0s) must exceed WORKER_RETRY_IN_PLACE_FOR (1m0s)"},
		{map[string]string{"PAYOUT_DEADLINE_SENDING": "4m"}, "PAYOUT_DEADLINE_SENDING (4m0s) must exceed WORKER_RETRY_IN_PLACE_FOR plus 6 × PSP_CALL_TIMEOUT (4m0s)"},
		{map[string]string{"PAYOUT_DEADLINE_RETRYING": "3m"}, "PAYOUT_DEADLINE_RETRYING (3m0s) must exceed the longest scheduled wait (PSP_BACKOFF_MAX, PSP_BREAKER_DEFER, PSP_SETTLE_WINDOW: 2m0s) plus WORKER_RETRY_IN_PLACE_FOR (3m0s)"},
		{map[string]string{"PAYOUT_PENDING_ESCALATE_AFTER": "30m"}, "PAYOUT_PENDING_ESCALATE_AFTER (30m0s) must exceed PAYOUT_CHECK_AFTER (30m0s)"},
		{map[string]string{"PAYOUT_REVIEW_DEADLINE": "0s"}, "PAYOUT_REVIEW_DEADLINE must be positive"},
	} {
		_, err := readConfig(withEventKey(func(k string) string { return tc.env[k] }))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to say %q", tc.env, err, tc.want)
			continue
		}
		// A Go field path ("Backoff.Base", "SettleWindow") means a field the
		// config layer did not map to its variable.
		for _, field := range []string{"Backoff.", "BreakerDefer", "CallTimeout", "IdempotencyWindow", "SettleWindow", "Deadlines.", "InPlace",
			"ConsecutiveFailures", "OpenFor", "HalfOpenProbes"} {
			if strings.Contains(err.Error(), field) {
				t.Errorf("%v: error %q names Go field %s instead of its variable", tc.env, err, field)
			}
		}
	}
}

// The age alerts (services/dlq-admin/alerts/prometheus-rules.yml) fire at
// each state's default deadline: the two must not drift apart.
func TestDeadlineAlertsAgreeWithTheDefaults(t *testing.T) {
	cfg, err := readConfig(withEventKey(func(string) string { return "" }))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../dlq-admin/alerts/prometheus-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Sweep.Deadlines
	for state, want := range map[string]time.Duration{
		`state="INITIALIZED"`:                        d.Initialized,
		`state="SENDING_TO_GATEWAY"`:                 d.Sending,
		`state="RETRYING"`:                           d.Retrying,
		`state=~"SENT_TO_GATEWAY|AWAITING_RESPONSE"`: d.Pending,
		`state="NEEDS_REVIEW"`:                       d.Review,
	} {
		re := regexp.MustCompile(`aegis_payout_oldest_age_seconds\{` + regexp.QuoteMeta(state) + `\}\) > (\d+)`)
		m := re.FindSubmatch(raw)
		if m == nil {
			t.Errorf("no age alert for %s", state)
			continue
		}
		if got, _ := strconv.Atoi(string(m[1])); time.Duration(got)*time.Second != want {
			t.Errorf("age alert for %s fires at %ss, the default deadline is %s", state, m[1], want)
		}
	}
}

// A refund waits for its payment's credit at least as long as the PSP
// reconciliation needs to recover the payment: the default follows
// PSP_RECONCILE_INTERVAL, and a shorter pair is refused, naming both.
func TestMoneyBackCreditWaitOutlastsThePSPReconciliation(t *testing.T) {
	c, err := readConfig(withEventKey(func(string) string { return "" }))
	if err != nil {
		t.Fatal(err)
	}
	if c.CreditWait < 15*time.Minute+30*time.Minute {
		t.Errorf("default MONEY_BACK_CREDIT_WAIT %s ends before a reconciliation every 15m, running up to 30m, recovers the payment", c.CreditWait)
	}
	c, err = readConfig(withEventKey(func(k string) string { return map[string]string{"PSP_RECONCILE_INTERVAL": "1h"}[k] }))
	if err != nil || c.CreditWait <= time.Hour+30*time.Minute {
		t.Errorf("with PSP_RECONCILE_INTERVAL 1h: wait %s, error %v", c.CreditWait, err)
	}
	_, err = readConfig(func(k string) string { return map[string]string{"MONEY_BACK_CREDIT_WAIT": "30s"}[k] })
	if err == nil || !strings.Contains(err.Error(), "MONEY_BACK_CREDIT_WAIT 30s is shorter than PSP_RECONCILE_INTERVAL 15m0s") {
		t.Errorf("the old pair: error %v", err)
	}
}
