package chaos

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/aegis-payments/aegis/pkg/payoutstate"
)

// WeekScale is the week profile's time-scale factor: one simulated day
// passes in 30 s of wall time, seven in three and a half minutes.
const WeekScale = 2880

// simDay is one simulated day, the unit the week profile's faults and
// deadlines are written in.
const simDay = 24 * time.Hour

// Reader names who reads a variable: the service's config reader, or the
// PSP stand-in.
type Reader string

// Readers.
const (
	ReadAll      Reader = "all services"
	ReadWorker   Reader = "payout-worker"
	ReadRelay    Reader = "outbox-relay"
	ReadWebhook  Reader = "webhook-api"
	ReadDLQAdmin Reader = "dlq-admin"
	ReadPSP      Reader = "aegis-psp (stand-in)"
)

// ScaledVar is one duration the time scale acts on: its variable, who reads
// it, its default there, and how the scaled profile sets it.
type ScaledVar struct {
	Env    string
	Reader Reader
	// Real is the default in the reader (services/*/run.go, or the
	// stand-in's config.go); for the stand-in's settle delay the time a
	// real PSP takes.
	Real time.Duration
	// Floor is the least the scaled value may be; Why says why.
	Floor time.Duration
	// Fixed, when set, is the value used whatever the scale: the duration
	// measures wall-clock things (a network call, a process's liveness, a
	// query) that compressing the calendar does not shorten. Why says so.
	Fixed time.Duration
	// NotAVariable: the duration is built in (no variable sets it), so it
	// cannot be scaled; listed so the gap is visible. Fixed is its value.
	NotAVariable bool
	// Schedule, when set, makes the variable a comma-separated list of
	// delays (OUTBOUND_RETRY_SCHEDULE): each delay is scaled as a single
	// duration would be, and Real is their sum.
	Schedule []time.Duration
	Why      string
}

// Value is the variable's value at scale (1 or less: real time); for a
// schedule, the sum of its scaled delays.
func (v ScaledVar) Value(scale float64) time.Duration {
	if v.Fixed > 0 || v.NotAVariable {
		return v.Fixed
	}
	if len(v.Schedule) > 0 {
		return sum(v.ScheduleAt(scale))
	}
	return scaleOne(v.Real, v.Floor, scale)
}

// ScheduleAt is a schedule's delays at scale, each scaled (and floored)
// as a single duration.
func (v ScaledVar) ScheduleAt(scale float64) []time.Duration {
	out := make([]time.Duration, len(v.Schedule))
	for i, d := range v.Schedule {
		out[i] = scaleOne(d, v.Floor, scale)
	}
	return out
}

// EnvValue is the variable's value at scale as its reader parses it: a
// duration, or a schedule's comma-separated delays.
func (v ScaledVar) EnvValue(scale float64) string {
	if len(v.Schedule) == 0 || v.Fixed > 0 || v.NotAVariable {
		return v.Value(scale).String()
	}
	parts := make([]string, len(v.Schedule))
	for i, d := range v.ScheduleAt(scale) {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

// scaleOne is real at scale, to the millisecond, at least a millisecond
// when real is not zero, and at least floor.
func scaleOne(real, floor time.Duration, scale float64) time.Duration {
	if scale <= 1 {
		return real
	}
	d := time.Duration(math.Round(float64(real) / scale / float64(time.Millisecond)))
	d *= time.Millisecond
	if real > 0 && d <= 0 {
		d = time.Millisecond
	}
	return max(d, floor)
}

// Scaled reports whether the variable follows the scale (possibly floored).
func (v ScaledVar) Scaled() bool { return v.Fixed == 0 && !v.NotAVariable }

// ScaledVars is every duration that matters to money's life over days, in
// one place: the week profile scales each by one factor, except where a
// floor or a fixed value is argued. Durations that measure wall-clock work
// (a call, a lease, a session) keep the values the other profiles use.
// A duration added to a config reader belongs here as a row.
func ScaledVars() []ScaledVar {
	const (
		floorPoll = "a loop that queries Postgres; below this it would spend the run's two shared cores polling"
		wall      = "measures wall-clock work, not calendar time: compressing days does not make it shorter"
	)
	return []ScaledVar{
		// The PSP's idempotency window and ours.
		{Env: "PSP_IDEMPOTENCY_WINDOW", Reader: ReadPSP, Real: 24 * time.Hour,
			Why: "Stripe prunes keys after 24 h (docs.stripe.com/idempotency); the stand-in's key TTL"},
		{Env: "PSP_IDEMPOTENCY_WINDOW", Reader: ReadWorker, Real: 23 * time.Hour,
			Why: "ours: the PSP's 24 h less an hour's margin"},
		// Waits for the PSP.
		{Env: "PSP_CALL_TIMEOUT", Reader: ReadWorker, Real: 30 * time.Second, Fixed: time.Second,
			Why: "a network wait: " + wall + "; the stand-in answers in milliseconds"},
		{Env: "PSP_SETTLE_WINDOW", Reader: ReadWorker, Real: 2 * time.Minute, Fixed: 3 * time.Second,
			Why: "how long the PSP may still execute a request we stopped waiting for: the PSP's processing lag, " +
				wall + "; must exceed PSP_CALL_TIMEOUT (scaled it would be 42 ms, below the 1 s call timeout)"},
		{Env: "PSP_BACKOFF_BASE", Reader: ReadWorker, Real: 5 * time.Second, Floor: 50 * time.Millisecond,
			Why: "below 50 ms every retry lands inside the same PSP fault burst"},
		{Env: "PSP_BACKOFF_MAX", Reader: ReadWorker, Real: time.Minute, Floor: 200 * time.Millisecond,
			Why: "kept above PSP_BACKOFF_BASE's floor (backoff: Max >= Base)"},
		{Env: "BREAKER_OPEN_FOR", Reader: ReadAll, Real: 30 * time.Second, Floor: 100 * time.Millisecond,
			Why: "payout-worker's PSP breaker and the relay's Kafka breaker (PSP_BREAKER_DEFER follows it)"},
		// Looking again.
		{Env: "PAYOUT_CHECK_AFTER", Reader: ReadWorker, Real: 30 * time.Minute},
		{Env: "PAYOUT_SWEEP_INTERVAL", Reader: ReadWorker, Real: time.Minute, Floor: 500 * time.Millisecond, Why: floorPoll},
		{Env: "PSP_RECONCILE_INTERVAL", Reader: ReadWebhook, Real: 15 * time.Minute, Floor: 2 * time.Second,
			Why: "each run pages through the PSP's lists; " + floorPoll},
		{Env: "PSP_RECONCILE_WINDOW", Reader: ReadWebhook, Real: 24 * time.Hour},
		{Env: "PSP_RECONCILE_OVERLAP", Reader: ReadWebhook, Real: 10 * time.Minute},
		{Env: "PSP_RECONCILE_GRACE", Reader: ReadWebhook, Real: 15 * time.Minute},
		{Env: "PSP_RECONCILE_RUN_TIMEOUT", Reader: ReadWebhook, Real: 30 * time.Minute, Fixed: 20 * time.Second,
			Why: "the longest one reconciliation run may take (its River timeout): paging through the stand-in's lists " +
				"is " + wall + "; payout-worker reads it too, for MONEY_BACK_CREDIT_WAIT's rule"},
		{Env: "RECONCILE_INTERVAL", Reader: ReadDLQAdmin, Real: 24 * time.Hour,
			Why: "the ledger integrity check; its reader's minimum is 1 s"},
		// Waiting for money.
		{Env: "MONEY_BACK_CREDIT_WAIT", Reader: ReadWorker, Real: 46 * time.Minute, Fixed: 90 * time.Second,
			Why: "its default is PSP_RECONCILE_INTERVAL + PSP_RECONCILE_RUN_TIMEOUT + 1 min for the recovered credit's way " +
				"(pkg/config MinMoneyBackCreditWait), and payout-worker and webhook-api refuse less: with those two at this " +
				"profile's values (2 s, 20 s) and the minute, which no variable scales, that is 82 s"},
		// Each unfinished payout state's deadline (the sweeper acts past it).
		{Env: "PAYOUT_DEADLINE_INITIALIZED", Reader: ReadWorker, Real: 30 * time.Minute, Floor: 2 * time.Second,
			Why: "its reader refuses less than WORKER_RETRY_IN_PLACE_FOR (floored at 1 s)"},
		{Env: "PAYOUT_DEADLINE_SENDING", Reader: ReadWorker, Real: 15 * time.Minute, Floor: 8 * time.Second,
			Why: "its reader refuses less than WORKER_RETRY_IN_PLACE_FOR plus six PSP_CALL_TIMEOUTs (1 s + 6 × 1 s, wall time)"},
		{Env: "PAYOUT_DEADLINE_RETRYING", Reader: ReadWorker, Real: 30 * time.Minute, Floor: 5 * time.Second,
			Why: "its reader refuses less than the longest scheduled wait (PSP_SETTLE_WINDOW, 3 s fixed) plus WORKER_RETRY_IN_PLACE_FOR"},
		{Env: "PAYOUT_PENDING_ESCALATE_AFTER", Reader: ReadWorker, Real: 240 * time.Hour},
		{Env: "PAYOUT_REVIEW_DEADLINE", Reader: ReadWorker, Real: 24 * time.Hour},
		{Env: "CREDIT_SETTLEMENT_DELAY", Reader: ReadWorker, Real: 0, Why: "0 by default: scaled it stays 0"},
		// Retrying in place before a dead letter.
		{Env: "WORKER_RETRY_IN_PLACE_FOR", Reader: ReadWorker, Real: time.Minute, Floor: time.Second,
			Why: "a terminated Postgres connection takes tens of ms to replace: below 1 s every connection kill would dead-letter"},
		{Env: "DLQ_STORE_RETRY_FOR", Reader: ReadDLQAdmin, Real: time.Minute, Floor: time.Second,
			Why: "as WORKER_RETRY_IN_PLACE_FOR"},
		// Alarms.
		{Env: "DLQ_CHECK_INTERVAL", Reader: ReadDLQAdmin, Real: 30 * time.Second, Floor: time.Second, Why: floorPoll},
		{Env: "STALL_AFTER", Reader: ReadDLQAdmin, Real: 2 * time.Minute, Fixed: 2 * time.Minute,
			Why: "a consumer group making no progress: Kafka outages are wall time, " + wall},
		// Outbound events (outbox-relay's delivery to the endpoints,
		// docs/design/outbound.md).
		{Env: "OUTBOUND_RETRY_SCHEDULE", Reader: ReadRelay, Real: sum(OutboundRetrySchedule()),
			Schedule: OutboundRetrySchedule(),
			Why: "each delay after the first attempt scaled: about 27 h 35 min of retries become " +
				"about 35 s, so the receiver-down fault (6 simulated hours) ends well inside it"},
		{Env: "OUTBOUND_DISABLE_AFTER", Reader: ReadRelay, Real: 120 * time.Hour,
			Why: "an endpoint failing every attempt this long is disabled: scaled it still outlasts the retry schedule " +
				"and the receiver-down fault many times over"},
		{Env: "OUTBOUND_HEALTH_INTERVAL", Reader: ReadRelay, Real: time.Minute, Floor: time.Second,
			Why: "how often failing endpoints are looked for (to disable them); " + floorPoll},
		{Env: "OUTBOUND_POLL_INTERVAL", Reader: ReadRelay, Real: 250 * time.Millisecond, Fixed: 250 * time.Millisecond,
			Why: "an idle dispatcher's look for due deliveries: " + floorPoll + "; an intake commit or a finished attempt " +
				"wakes it sooner, and the scaled schedule's first delays are then due at the next look"},
		{Env: "OUTBOUND_TIMEOUT", Reader: ReadRelay, Real: 15 * time.Second, Fixed: chaosOutboundTimeout,
			Why: "one delivery attempt to the sink on the loopback: " + wall},
		{Env: "OUTBOUND_LEASE", Reader: ReadRelay, Real: 45 * time.Second, Fixed: chaosOutboundLease,
			Why: "a relay's claim on a delivery (default 2 × OUTBOUND_TIMEOUT + 15 s): process liveness, " + wall +
				"; must exceed OUTBOUND_TIMEOUT"},
		{Env: "OUTBOUND_ROTATION_OVERLAP", Reader: ReadDLQAdmin, Real: 24 * time.Hour,
			Why: "how long a rotated-out secret still signs"},
		{Env: "OUTBOUND_LOG_RETENTION", Reader: ReadRelay, Real: 720 * time.Hour, Fixed: 720 * time.Hour,
			Why: "housekeeping, not a money wait; the invariants read the run's attempts afterwards"},
		{Env: "OUTBOUND_MESSAGE_RETENTION", Reader: ReadRelay, Real: 720 * time.Hour, Fixed: 720 * time.Hour,
			Why: "housekeeping, not a money wait; invariant 18 reads the run's messages and deliveries afterwards"},
		// Wall-clock liveness and pacing: the values every chaos profile uses.
		{Env: "WALLET_LOCK_EXPIRY", Reader: ReadWorker, Real: 10 * time.Second, Fixed: 4 * time.Second,
			Why: "how long a dead worker's lock outlives it: process liveness, " + wall + " (reader's minimum 1 s)"},
		{Env: "KAFKA_SESSION_TIMEOUT", Reader: ReadAll, Real: 10 * time.Second, Fixed: chaosSessionTimeout,
			Why: "consumer liveness: " + wall},
		{Env: "RELAY_LEASE", Reader: ReadRelay, Real: time.Minute, Fixed: chaosRelayLease,
			Why: "a relay's claim on rows: process liveness, " + wall + "; must be at least twice RELAY_PUBLISH_TIMEOUT"},
		{Env: "RELAY_PUBLISH_TIMEOUT", Reader: ReadRelay, Real: 15 * time.Second, Fixed: 2 * time.Second, Why: "a Kafka produce: " + wall},
		{Env: "RELAY_BACKOFF_BASE", Reader: ReadRelay, Real: time.Second, Fixed: 300 * time.Millisecond,
			Why: "paces republishing through Kafka outages, which are wall time"},
		{Env: "RELAY_BACKOFF_MAX", Reader: ReadRelay, Real: 30 * time.Second, Fixed: 3 * time.Second,
			Why: "as RELAY_BACKOFF_BASE"},
		// The PSP stand-in.
		{Env: "PSP_SETTLE_DELAY", Reader: ReadPSP, Real: 2 * time.Hour,
			Why: "a payout's ordinary time at the PSP, shortened to two hours so the sweeper is not looking up every payout all run; " +
				"the pending_for fault holds chosen payouts for days"},
		{Env: "PSP_WEBHOOK_BACKOFF", Reader: ReadPSP, Real: time.Second, Fixed: time.Second,
			Why: "the stand-in's delivery retries (5 attempts): kept, so a webhook is lost only when a fault drops it"},
		{Env: "(retry_after_seconds)", Reader: ReadPSP, Real: time.Second, Fixed: time.Second, NotAVariable: true,
			Why: "Retry-After is whole seconds (RFC 9110 delta-seconds): it cannot go below 1 s"},
	}
}

// sum adds durations up.
func sum(ds []time.Duration) time.Duration {
	var d time.Duration
	for _, x := range ds {
		d += x
	}
	return d
}

// OutboundRetrySchedule is OUTBOUND_RETRY_SCHEDULE's default (Svix's:
// 5s,5m,30m,2h,5h,10h,10h; docs/design/outbound.md): the delays after the
// immediate first attempt.
func OutboundRetrySchedule() []time.Duration {
	return []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}
}

// outboundJitter is the schedule's jitter (±10 % of each delay): the
// longest a delivery's retries can take is the schedule's sum times
// 1 + outboundJitter.
const outboundJitter = 0.1

// receiverDownFor is how long, in simulated time, the receiver-down fault
// refuses the flaky endpoint's deliveries.
const receiverDownFor = 6 * time.Hour

// outboundSettleWait is how long invariant 18 waits, after the drains, for
// outbound deliveries to finish: a delivery created as the drain ended
// may need the whole schedule at its longest jitter (scaled), and the
// margin covers the intake's lag and a claim's lease after a relay was
// killed.
func outboundSettleWait(scale float64) time.Duration {
	var v ScaledVar
	for _, x := range ScaledVars() {
		if x.Env == "OUTBOUND_RETRY_SCHEDULE" {
			v = x
		}
	}
	return time.Duration(float64(v.Value(scale))*(1+outboundJitter)) + outboundSettleMargin
}

// outboundSettleMargin is the wall time outboundSettleWait adds to the
// schedule: more than a killed relay's claim (OUTBOUND_LEASE) and a
// dispatcher's poll.
const outboundSettleMargin = 30 * time.Second

// The chaos values of the dispatcher's wall-clock durations.
const (
	chaosOutboundTimeout = 2 * time.Second
	chaosOutboundLease   = 6 * time.Second
)

// ScaledEnv is the environment the scaled variables give readers at scale.
// Variables without a variable name (NotAVariable) are left out.
func ScaledEnv(scale float64, readers ...Reader) map[string]string {
	want := map[Reader]bool{}
	for _, r := range readers {
		want[r] = true
	}
	env := map[string]string{}
	for _, v := range ScaledVars() {
		if v.NotAVariable || !want[v.Reader] {
			continue
		}
		env[v.Env] = v.EnvValue(scale)
	}
	return env
}

// Sim converts a simulated duration to wall time at the profile's scale.
func (p Profile) Sim(d time.Duration) time.Duration {
	if p.TimeScale <= 1 {
		return d
	}
	return time.Duration(float64(d) / p.TimeScale)
}

// Deadline is how long a payout may stay in a state, in simulated time,
// before the week profile expects it looked up, finished or alerted on.
type Deadline struct {
	States []payoutstate.Status
	Max    time.Duration
	Why    string
}

// Deadlines are what invariant 10 holds unfinished payouts to: the
// horizons past which money is at risk. Unsent states are held to the
// PSP's idempotency window, which payout-worker's own deadlines
// (PAYOUT_DEADLINE_*) fall well within. States at the PSP are held to
// three days, shorter than the worker's PAYOUT_PENDING_ESCALATE_AFTER
// (ten): the week profile keeps a payout pending at the PSP for two
// simulated days at most, so one still unfinished after three is one the
// services failed to learn the outcome of.
func Deadlines() []Deadline {
	return []Deadline{
		{States: []payoutstate.Status{payoutstate.Initialized, payoutstate.Sending, payoutstate.Retrying, payoutstate.Failed}, Max: 23 * time.Hour,
			Why: "past the PSP's idempotency window a payout resumed without a lookup is paid twice"},
		{States: []payoutstate.Status{payoutstate.Sent, payoutstate.Awaiting}, Max: 3 * simDay,
			Why: "a payout pending at the PSP for days: looked up, then escalated"},
		{States: []payoutstate.Status{payoutstate.NeedsReview}, Max: 0, Why: "a person must be told at once"},
	}
}

// ScaleTable renders the scaled variables at scale as a Markdown table
// (docs/reports/reliability.md, and -print-scale).
func ScaleTable(scale float64) string {
	vars := ScaledVars()
	sort.SliceStable(vars, func(i, j int) bool { return vars[i].Reader < vars[j].Reader })
	var b strings.Builder
	fmt.Fprintf(&b, "| variable | read by | real default | at scale %g | note |\n|---|---|---|---|---|\n", scale)
	for _, v := range vars {
		how := v.EnvValue(scale)
		switch {
		case v.NotAVariable:
			how += " (built in, not scaled)"
		case !v.Scaled():
			how += " (not scaled)"
		case v.Floor > 0 && v.Value(scale) == v.Floor && time.Duration(float64(v.Real)/scale) < v.Floor:
			how += " (floor)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", v.Env, v.Reader, v.Real, how, v.Why)
	}
	return b.String()
}
