package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Report is what a run found.
type Report struct {
	Seed    uint64
	Profile string
	// Sent counts workload operations by kind; Acknowledged counts 2xx webhooks.
	Sent         map[string]int
	Acknowledged int
	Faults       map[string]int
	Retries      int
	DeadLetters  int
	Replays      int
	// NotReplayable counts dead letters dlq-admin refused to replay.
	NotReplayable int
	Payouts       map[string]int
	// Pickup is the time from a payout's creation to its first transition
	// by a worker.
	Pickup struct {
		Payouts       int
		P50, P99, Max time.Duration
	}
	// PayoutPickup and CreditPickup are the pickup latencies judged
	// against PickupBound (latency.go).
	PayoutPickup, CreditPickup Latency
	PickupBound                time.Duration
	// Operator is what the operator pass did (operator.go).
	Operator *OperatorReport
	// Week is the week profile's figures (nil for the other profiles).
	Week       *WeekFigures
	Checks     []string
	Violations []string
	Took       time.Duration
	Duration   time.Duration
	Rate       int
	FaultEvery time.Duration
	// Soak measurements.
	StartFootprint, DrainedFootprint []ServiceSample
	Lag                              []LagSample
}

func (r *Report) violation(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

func (r *Report) passed(format string, args ...any) {
	r.Checks = append(r.Checks, fmt.Sprintf(format, args...))
}

// OK reports whether every invariant held.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// String renders the summary table.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nchaos run: seed %d, profile %s, %s\n\n", r.Seed, r.Profile, r.Took.Round(time.Second))
	b.WriteString("| what | count |\n|---|---|\n")
	row := func(k string, v int) { fmt.Fprintf(&b, "| %s | %d |\n", k, v) }
	total := 0
	for _, v := range r.Sent {
		total += v
	}
	row("operations sent", total)
	for _, k := range sortedKeys(r.Sent) {
		row("  "+k, r.Sent[k])
	}
	row("webhooks acknowledged (2xx)", r.Acknowledged)
	faults := 0
	for _, v := range r.Faults {
		faults += v
	}
	row("faults injected", faults)
	for _, k := range sortedKeys(r.Faults) {
		row("  "+k, r.Faults[k])
	}
	for _, k := range sortedKeys(r.Payouts) {
		row("payouts "+k, r.Payouts[k])
	}
	row("retries (outbox publishes + payout attempts)", r.Retries)
	row("dead letters", r.DeadLetters)
	row("dead letters replayed", r.Replays)
	row("dead letters not replayable", r.NotReplayable)
	row("violations", len(r.Violations))
	if r.Pickup.Payouts > 0 {
		fmt.Fprintf(&b, "\npayout pickup (created → first worker transition, %d payouts): p50 %s, p99 %s, max %s\n",
			r.Pickup.Payouts, r.Pickup.P50.Round(time.Millisecond), r.Pickup.P99.Round(time.Millisecond), r.Pickup.Max.Round(time.Millisecond))
	}
	if r.PickupBound > 0 {
		fmt.Fprintf(&b, "pickup bound %s; payouts %s; credits (acknowledged → credited) %s\n", r.PickupBound, r.PayoutPickup, r.CreditPickup)
	}
	for _, l := range r.Operator.lines() {
		b.WriteString(l + "\n")
	}
	for _, l := range r.Week.lines() {
		b.WriteString(l + "\n")
	}
	b.WriteString("\n")
	for _, c := range r.Checks {
		b.WriteString("ok   " + c + "\n")
	}
	for _, v := range r.Violations {
		b.WriteString("FAIL " + v + "\n")
	}
	if !r.OK() {
		fmt.Fprintf(&b, "\nreproduce with: make chaos SEED=%d PROFILE=%s\n", r.Seed, r.Profile)
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
