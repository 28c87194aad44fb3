package chaos

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aegis-payments/aegis/pkg/config"
)

// Every duration the week profile scales is its real default divided by
// the one factor (or the floor argued for it), shorter than the default;
// the ones that do not scale say why.
func TestWeekScalesEveryListedDurationByOneFactor(t *testing.T) {
	p, err := ProfileNamed("week")
	if err != nil {
		t.Fatal(err)
	}
	if p.TimeScale != WeekScale {
		t.Fatalf("week profile scale %v, want %v", p.TimeScale, float64(WeekScale))
	}
	if p.Duration != 7*24*time.Hour/WeekScale || p.Duration > 5*time.Minute {
		t.Fatalf("week profile runs %s of workload, want seven simulated days in a few minutes", p.Duration)
	}
	seen := map[string]bool{}
	for _, v := range ScaledVars() {
		key := string(v.Reader) + " " + v.Env
		if seen[key] {
			t.Errorf("%s listed twice", key)
		}
		seen[key] = true
		got := v.Value(WeekScale)
		if !v.Scaled() {
			if v.Why == "" {
				t.Errorf("%s (%s) is not scaled and does not say why", v.Env, v.Reader)
			}
			continue
		}
		parts := []time.Duration{v.Real}
		if len(v.Schedule) > 0 {
			parts = v.Schedule
		}
		var want time.Duration
		for _, real := range parts {
			w := time.Duration(math.Round(float64(real)/WeekScale/float64(time.Millisecond))) * time.Millisecond
			if real > 0 && w == 0 {
				w = time.Millisecond
			}
			if v.Floor > 0 && w < v.Floor {
				if v.Why == "" {
					t.Errorf("%s is floored at %s and does not say why", v.Env, v.Floor)
				}
				w = v.Floor
			}
			want += w
		}
		if got != want {
			t.Errorf("%s (%s): %s at scale %d, want %s", v.Env, v.Reader, got, WeekScale, want)
		}
		if v.Real > 0 && got >= v.Real {
			t.Errorf("%s (%s): scaled %s is not shorter than its default %s", v.Env, v.Reader, got, v.Real)
		}
		if v.Value(1) != v.Real {
			t.Errorf("%s at scale 1 is %s, want its default %s", v.Env, v.Value(1), v.Real)
		}
	}
	// The durations that bound the promises are all listed.
	for _, name := range []string{"PSP_IDEMPOTENCY_WINDOW", "PSP_SETTLE_WINDOW", "PAYOUT_SWEEP_INTERVAL", "PAYOUT_CHECK_AFTER",
		"PSP_RECONCILE_INTERVAL", "PSP_BACKOFF_BASE", "PSP_BACKOFF_MAX", "BREAKER_OPEN_FOR", "MONEY_BACK_CREDIT_WAIT",
		"PSP_RECONCILE_RUN_TIMEOUT", "PAYOUT_DEADLINE_INITIALIZED", "PAYOUT_DEADLINE_SENDING", "PAYOUT_DEADLINE_RETRYING",
		"PAYOUT_PENDING_ESCALATE_AFTER", "PAYOUT_REVIEW_DEADLINE",
		"OUTBOUND_RETRY_SCHEDULE", "OUTBOUND_DISABLE_AFTER", "(retry_after_seconds)", "PSP_SETTLE_DELAY"} {
		found := false
		for k := range seen {
			if len(k) >= len(name) && k[len(k)-len(name):] == name {
				found = true
			}
		}
		if !found {
			t.Errorf("%s is not listed", name)
		}
	}
}

// The scaled values still pass the rules the services' config readers and
// the stand-in check (mirrored here: the readers are in the services'
// main packages), and the defaults still agree with each other.
func TestWeekScaledValuesKeepTheReadersRules(t *testing.T) {
	svc := ScaledEnv(WeekScale, ReadAll, ReadWorker, ReadRelay, ReadWebhook, ReadDLQAdmin)
	pspEnv := ScaledEnv(WeekScale, ReadPSP)
	d := func(env map[string]string, name string) time.Duration {
		t.Helper()
		v, ok := env[name]
		if !ok {
			t.Fatalf("%s not set", name)
		}
		x, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", name, v, err)
		}
		return x
	}
	// OUTBOUND_RETRY_SCHEDULE is a list: its parsed delays, and their sum.
	var delays []time.Duration
	for _, part := range strings.Split(svc["OUTBOUND_RETRY_SCHEDULE"], ",") {
		x, err := time.ParseDuration(part)
		if err != nil || x <= 0 {
			t.Fatalf("OUTBOUND_RETRY_SCHEDULE=%q: delay %q is not a positive duration", svc["OUTBOUND_RETRY_SCHEDULE"], part)
		}
		delays = append(delays, x)
	}
	if len(delays) != len(OutboundRetrySchedule()) {
		t.Fatalf("OUTBOUND_RETRY_SCHEDULE=%q has %d delays, the default %d", svc["OUTBOUND_RETRY_SCHEDULE"], len(delays), len(OutboundRetrySchedule()))
	}
	outboundSchedule := sum(delays)
	rules := []struct {
		rule string
		ok   bool
	}{
		{"PSP_SETTLE_WINDOW > PSP_CALL_TIMEOUT (payout.Config)", d(svc, "PSP_SETTLE_WINDOW") > d(svc, "PSP_CALL_TIMEOUT")},
		{"PSP_BACKOFF_BASE > 0", d(svc, "PSP_BACKOFF_BASE") > 0},
		{"PSP_BACKOFF_MAX >= PSP_BACKOFF_BASE (backoff.Policy)", d(svc, "PSP_BACKOFF_MAX") >= d(svc, "PSP_BACKOFF_BASE")},
		{"PSP_IDEMPOTENCY_WINDOW > 0", d(svc, "PSP_IDEMPOTENCY_WINDOW") > 0},
		{"BREAKER_OPEN_FOR > 0 (breaker.Config)", d(svc, "BREAKER_OPEN_FOR") > 0},
		{"PAYOUT_CHECK_AFTER > 0", d(svc, "PAYOUT_CHECK_AFTER") > 0},
		{"PAYOUT_SWEEP_INTERVAL > 0", d(svc, "PAYOUT_SWEEP_INTERVAL") > 0},
		{"WORKER_RETRY_IN_PLACE_FOR > 0", d(svc, "WORKER_RETRY_IN_PLACE_FOR") > 0},
		{"MONEY_BACK_CREDIT_WAIT >= PSP_RECONCILE_INTERVAL + PSP_RECONCILE_RUN_TIMEOUT + the credit's way (config.MoneyBackTiming)",
			d(svc, "MONEY_BACK_CREDIT_WAIT") >= config.MinMoneyBackCreditWait(d(svc, "PSP_RECONCILE_INTERVAL"), d(svc, "PSP_RECONCILE_RUN_TIMEOUT"))},
		{"PSP_RECONCILE_RUN_TIMEOUT >= 1s (webhook-api)", d(svc, "PSP_RECONCILE_RUN_TIMEOUT") >= time.Second},
		{"PAYOUT_DEADLINE_INITIALIZED > WORKER_RETRY_IN_PLACE_FOR",
			d(svc, "PAYOUT_DEADLINE_INITIALIZED") > d(svc, "WORKER_RETRY_IN_PLACE_FOR")},
		{"PAYOUT_DEADLINE_SENDING > WORKER_RETRY_IN_PLACE_FOR + 6 × PSP_CALL_TIMEOUT",
			d(svc, "PAYOUT_DEADLINE_SENDING") > d(svc, "WORKER_RETRY_IN_PLACE_FOR")+6*d(svc, "PSP_CALL_TIMEOUT")},
		{"PAYOUT_DEADLINE_RETRYING > max(PSP_BACKOFF_MAX, BREAKER_OPEN_FOR, PSP_SETTLE_WINDOW) + WORKER_RETRY_IN_PLACE_FOR",
			d(svc, "PAYOUT_DEADLINE_RETRYING") > max(d(svc, "PSP_BACKOFF_MAX"), d(svc, "BREAKER_OPEN_FOR"), d(svc, "PSP_SETTLE_WINDOW"))+
				d(svc, "WORKER_RETRY_IN_PLACE_FOR")},
		{"PAYOUT_PENDING_ESCALATE_AFTER > PAYOUT_CHECK_AFTER", d(svc, "PAYOUT_PENDING_ESCALATE_AFTER") > d(svc, "PAYOUT_CHECK_AFTER")},
		{"CREDIT_SETTLEMENT_DELAY >= 0", d(svc, "CREDIT_SETTLEMENT_DELAY") >= 0},
		{"WALLET_LOCK_EXPIRY >= 1s", d(svc, "WALLET_LOCK_EXPIRY") >= time.Second},
		{"RELAY_LEASE >= 2 × RELAY_PUBLISH_TIMEOUT (relay.Config)", d(svc, "RELAY_LEASE") >= 2*d(svc, "RELAY_PUBLISH_TIMEOUT")},
		{"RELAY_BACKOFF_MAX >= RELAY_BACKOFF_BASE", d(svc, "RELAY_BACKOFF_MAX") >= d(svc, "RELAY_BACKOFF_BASE")},
		{"PSP_RECONCILE_INTERVAL >= 0", d(svc, "PSP_RECONCILE_INTERVAL") >= 0},
		{"PSP_RECONCILE_WINDOW > 0", d(svc, "PSP_RECONCILE_WINDOW") > 0},
		{"PSP_RECONCILE_OVERLAP >= 0", d(svc, "PSP_RECONCILE_OVERLAP") >= 0},
		{"PSP_RECONCILE_GRACE >= 0", d(svc, "PSP_RECONCILE_GRACE") >= 0},
		{"RECONCILE_INTERVAL >= 1s (dlq-admin)", d(svc, "RECONCILE_INTERVAL") >= time.Second},
		{"DLQ_STORE_RETRY_FOR > 0", d(svc, "DLQ_STORE_RETRY_FOR") > 0},
		{"DLQ_CHECK_INTERVAL > 0", d(svc, "DLQ_CHECK_INTERVAL") > 0},
		{"STALL_AFTER > 0", d(svc, "STALL_AFTER") > 0},
		{"OUTBOUND_DISABLE_AFTER > 0", d(svc, "OUTBOUND_DISABLE_AFTER") > 0},
		{"OUTBOUND_LEASE > OUTBOUND_TIMEOUT (deliver.Config)", d(svc, "OUTBOUND_LEASE") > d(svc, "OUTBOUND_TIMEOUT")},
		{"OUTBOUND_POLL_INTERVAL > 0", d(svc, "OUTBOUND_POLL_INTERVAL") > 0},
		{"OUTBOUND_HEALTH_INTERVAL > 0", d(svc, "OUTBOUND_HEALTH_INTERVAL") > 0},
		{"invariant 18's margin > OUTBOUND_LEASE + OUTBOUND_POLL_INTERVAL (a killed relay's claim, then a look)",
			outboundSettleMargin > d(svc, "OUTBOUND_LEASE")+d(svc, "OUTBOUND_POLL_INTERVAL")},
		{"OUTBOUND_ROTATION_OVERLAP > 0", d(svc, "OUTBOUND_ROTATION_OVERLAP") > 0},
		{"OUTBOUND_LOG_RETENTION > the retry schedule + OUTBOUND_DISABLE_AFTER (docs/design/outbound.md, Retention)",
			d(svc, "OUTBOUND_LOG_RETENTION") > outboundSchedule+d(svc, "OUTBOUND_DISABLE_AFTER")},
		{"OUTBOUND_MESSAGE_RETENTION > the retry schedule + OUTBOUND_DISABLE_AFTER (docs/design/outbound.md, Retention)",
			d(svc, "OUTBOUND_MESSAGE_RETENTION") > outboundSchedule+d(svc, "OUTBOUND_DISABLE_AFTER")},
		// Defaults agree: our key window ends before the PSP forgets the
		// key, a lookup-worthy payout is looked at within the PSP's
		// window, and the stand-in settles payouts after we start
		// looking them up (so lookups happen).
		{"payout-worker's PSP_IDEMPOTENCY_WINDOW < the stand-in's", d(svc, "PSP_IDEMPOTENCY_WINDOW") < d(pspEnv, "PSP_IDEMPOTENCY_WINDOW")},
		{"PAYOUT_CHECK_AFTER < PSP_IDEMPOTENCY_WINDOW", d(svc, "PAYOUT_CHECK_AFTER") < d(svc, "PSP_IDEMPOTENCY_WINDOW")},
		{"PSP_RECONCILE_WINDOW > PSP_RECONCILE_INTERVAL", d(svc, "PSP_RECONCILE_WINDOW") > d(svc, "PSP_RECONCILE_INTERVAL")},
		{"stand-in PSP_SETTLE_DELAY > PAYOUT_CHECK_AFTER", d(pspEnv, "PSP_SETTLE_DELAY") > d(svc, "PAYOUT_CHECK_AFTER")},
		{"stand-in PSP_IDEMPOTENCY_WINDOW >= 0", d(pspEnv, "PSP_IDEMPOTENCY_WINDOW") >= 0},
	}
	for _, r := range rules {
		if !r.ok {
			t.Errorf("scaled values break %s (services %v; stand-in %v)", r.rule, svc, pspEnv)
		}
	}
	// The week's faults outlast what they must outlast.
	p, _ := ProfileNamed("week")
	if out := p.Sim(simDay + simDay/10); out <= d(pspEnv, "PSP_IDEMPOTENCY_WINDOW") {
		t.Errorf("a worker out for a simulated day (%s) comes back before the PSP forgets its key (%s)", out, d(pspEnv, "PSP_IDEMPOTENCY_WINDOW"))
	}
	if away := p.Sim(3 * time.Hour); max(away, 3*d(svc, "WORKER_RETRY_IN_PLACE_FOR")) <= d(svc, "WORKER_RETRY_IN_PLACE_FOR") {
		t.Errorf("Postgres is away for less than the in-place retry")
	}
	// The flaky receiver's outage ends well inside the retry schedule at
	// its shortest (every delay 10 % early): a delivery refused all through
	// it still has attempts left, so invariant 18 holds every event to
	// reaching both endpoints. The endpoint is not disabled meanwhile, and
	// invariant 18 waits out the whole schedule at its longest.
	down := p.Sim(receiverDownFor)
	if shortest := time.Duration(float64(outboundSchedule) * (1 - outboundJitter)); down >= shortest/2 {
		t.Errorf("the receiver is down for %s, not well inside the retry schedule (%s at its shortest)", down, shortest)
	}
	if d(svc, "OUTBOUND_DISABLE_AFTER") <= down+outboundSchedule {
		t.Errorf("OUTBOUND_DISABLE_AFTER (%s) would disable the flaky endpoint within its outage and one schedule (%s)",
			d(svc, "OUTBOUND_DISABLE_AFTER"), down+outboundSchedule)
	}
	if longest := time.Duration(float64(outboundSchedule) * (1 + outboundJitter)); outboundSettleWait(WeekScale) <= longest {
		t.Errorf("invariant 18 waits %s for deliveries, not longer than the schedule at its longest (%s)", outboundSettleWait(WeekScale), longest)
	}
	// The first deadline is the one past which a resume double pays.
	if Deadlines()[0].Max > 23*time.Hour {
		t.Errorf("the deadline of unsent payouts (%s) outlasts our idempotency window", Deadlines()[0].Max)
	}
}

// The other profiles are not scaled.
func TestOtherProfilesRunInRealTime(t *testing.T) {
	for _, name := range []string{"short", "full", "soak"} {
		p, err := ProfileNamed(name)
		if err != nil {
			t.Fatal(err)
		}
		if p.TimeScale != 0 || p.Sim(time.Hour) != time.Hour || p.Faults != nil {
			t.Errorf("profile %s: scale %v, faults %v", name, p.TimeScale, p.Faults)
		}
	}
}
