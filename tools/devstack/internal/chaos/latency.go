package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Latency summarises how long work waited to be picked up.
type Latency struct {
	N             int
	P50, P99, Max time.Duration
	// Replayed counts items that were only done by the operator's replay
	// at the end of the run: their wait is the run's, not the system's.
	Replayed int
}

func (l Latency) String() string {
	return fmt.Sprintf("%d: p50 %s, p99 %s, max %s (%d more only after the final replay)", l.N,
		l.P50.Round(time.Millisecond), l.P99.Round(time.Millisecond), l.Max.Round(time.Millisecond), l.Replayed)
}

func summarise(waits []time.Duration, replayed int) Latency {
	l := Latency{N: len(waits), Replayed: replayed}
	if len(waits) == 0 {
		return l
	}
	slices.Sort(waits)
	at := func(q float64) time.Duration { return waits[min(len(waits)-1, int(q*float64(len(waits))))] }
	l.P50, l.P99, l.Max = at(0.5), at(0.99), waits[len(waits)-1]
	return l
}

// defaultPickupBound is the pickup bound: the group's session timeout (a
// dead member's partitions move after it), twice the relay's poll interval
// (a row committed just after a poll) and the longest outage injected:
// a Kafka outage (nothing moves while Kafka is away) from the start of its
// stop to the end of its relaunch, or a crash loop of the payout worker from
// its first kill until the group is whole again.
func defaultPickupBound(sessionTimeout, pollInterval, longestOutage time.Duration) time.Duration {
	return sessionTimeout + 2*pollInterval + longestOutage
}

// allowance is how long one item may wait from from to to: the run's bound,
// or, when the item lived through several outages one after another (a
// worker killed, then a crash loop, then Kafka away), the session timeout,
// twice the poll interval and twice the time those outages overlap its wait:
// once for the outage and once for working off the backlog it left (the
// workload keeps arriving meanwhile). A stall (a ghost member, a poison
// record) is not an outage and is never allowed for: its items wait for
// minutes or for ever.
func (su *suite) allowance(from, to time.Time) time.Duration {
	if su.fixedBound {
		return su.pickupBound
	}
	var outaged time.Duration
	for _, o := range su.outages {
		start, end := o[0], o[1]
		if from.After(start) {
			start = from
		}
		if to.Before(end) {
			end = to
		}
		if end.After(start) {
			outaged += end.Sub(start)
		}
	}
	return max(su.pickupBound, chaosSessionTimeout+2*chaosPollInterval+2*outaged)
}

// checkPickup measures, for the work the system finished on its own (before
// the final replay), how long it waited: a payout from its creation to the
// worker's first transition, a payment from its webhook's acknowledgement to
// its credit. Either over bound fails the run: a stalled partition shows
// here even when everything is eventually done.
func (su *suite) checkPickup(ctx context.Context, wl *workload, rep *Report) error {
	bound := su.pickupBound
	rows, err := su.pool.Query(ctx, `
		SELECT min(at) FILTER (WHERE from_status IS NULL), min(at) FILTER (WHERE from_status IS NOT NULL)
		FROM payout_transitions GROUP BY payout_id`)
	if err != nil {
		return err
	}
	var payouts []time.Duration
	var payoutSpans, creditSpans [][2]time.Time
	replayedPayouts := 0
	var slowPayout [2]time.Time
	for rows.Next() {
		var created, first *time.Time
		if err := rows.Scan(&created, &first); err != nil {
			return err
		}
		if created == nil || first == nil {
			continue
		}
		if !su.replayStart.IsZero() && first.After(su.replayStart) {
			replayedPayouts++
			continue
		}
		payouts = append(payouts, max(0, first.Sub(*created)))
		payoutSpans = append(payoutSpans, [2]time.Time{*created, *first})
		if first.Sub(*created)-su.allowance(*created, *first) > slowPayout[1].Sub(slowPayout[0])-su.allowance(slowPayout[0], slowPayout[1]) {
			slowPayout = [2]time.Time{*created, *first}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = su.pool.Query(ctx, `SELECT reference, min(created_at) FROM ledger_transactions WHERE kind = 'credit' GROUP BY 1`)
	if err != nil {
		return err
	}
	creditedAt := map[string]time.Time{}
	for rows.Next() {
		var ref string
		var at time.Time
		if err := rows.Scan(&ref, &at); err != nil {
			return err
		}
		creditedAt[ref] = at
	}
	if err := rows.Err(); err != nil {
		return err
	}
	ackedAt := map[string]time.Time{}
	wl.mu.Lock()
	for _, h := range wl.webhooks {
		if h.Reference == "" || h.Status/100 != 2 || h.AckedAt.IsZero() {
			continue
		}
		if at, ok := ackedAt[h.Reference]; !ok || h.AckedAt.Before(at) {
			ackedAt[h.Reference] = h.AckedAt
		}
	}
	wl.mu.Unlock()
	var credits []time.Duration
	replayedCredits := 0
	var slowCredit [2]time.Time
	for ref, acked := range ackedAt {
		at, ok := creditedAt[ref]
		if !ok {
			continue // check 1 reports it
		}
		if !su.replayStart.IsZero() && at.After(su.replayStart) {
			replayedCredits++
			continue
		}
		credits = append(credits, max(0, at.Sub(acked)))
		creditSpans = append(creditSpans, [2]time.Time{acked, at})
		if at.Sub(acked)-su.allowance(acked, at) > slowCredit[1].Sub(slowCredit[0])-su.allowance(slowCredit[0], slowCredit[1]) {
			slowCredit = [2]time.Time{acked, at}
		}
	}
	rep.PayoutPickup, rep.CreditPickup = summarise(payouts, replayedPayouts), summarise(credits, replayedCredits)
	su.timeline("payout", payoutSpans)
	su.timeline("credit", creditSpans)
	rep.PickupBound = bound
	bad := 0
	for _, c := range []struct {
		name    string
		l       Latency
		slowest [2]time.Time
	}{
		{"payout pickup (created → first worker transition)", rep.PayoutPickup, slowPayout},
		{"credit pickup (webhook acknowledged → credited)", rep.CreditPickup, slowCredit},
	} {
		if c.l.N == 0 {
			continue
		}
		// slowest is the item furthest over its own allowance.
		wait, allowed := c.slowest[1].Sub(c.slowest[0]), su.allowance(c.slowest[0], c.slowest[1])
		if wait > allowed {
			rep.violation("%s: an item waited %s, over its allowance %s (the bound %s, or the outages it lived through); p50 %s, p99 %s, max %s over %d; it waited %s; outages (Kafka, worker and relay kills, crash loops, Redis) %s",
				c.name, wait.Round(time.Millisecond), allowed.Round(time.Millisecond), bound, c.l.P50.Round(time.Millisecond),
				c.l.P99.Round(time.Millisecond), c.l.Max.Round(time.Millisecond), c.l.N, su.relative(c.slowest[0], c.slowest[1]), su.outageList())
			bad++
		}
	}
	if bad == 0 {
		rep.passed("10. pickup within %s, or within the outages an item lived through: payouts %s; credits %s", bound, rep.PayoutPickup, rep.CreditPickup)
	}
	return nil
}

// relative renders a span as offsets from the start of the run.
func (su *suite) relative(from, to time.Time) string {
	return fmt.Sprintf("from +%s to +%s", from.Sub(su.started).Round(time.Second), to.Sub(su.started).Round(time.Second))
}

func (su *suite) outageList() string {
	if len(su.outages) == 0 {
		return "none"
	}
	var parts []string
	for _, o := range su.outages {
		parts = append(parts, su.relative(o[0], o[1]))
	}
	return strings.Join(parts, ", ")
}

// timeline logs, for each 5 s of arrivals whose slowest item waited longer
// than the no-outage part of the bound (session timeout + 2× poll), how
// long they waited: a stall shows as a run of buckets whose waits shrink by
// 5 s each (everything waited for the same moment), backlog as waits that
// do not. It is how the uncounted outage of the old count-based leader
// fault was found; read it beside the fault log.
func (su *suite) timeline(what string, items [][2]time.Time) {
	buckets := map[int][]time.Duration{}
	for _, it := range items {
		b := int(it[0].Sub(su.started) / (5 * time.Second))
		buckets[b] = append(buckets[b], it[1].Sub(it[0]))
	}
	keys := make([]int, 0, len(buckets))
	for k := range buckets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if l := summarise(buckets[k], 0); l.Max > chaosSessionTimeout+2*chaosPollInterval {
			su.cfg.log("slow %s pickup, arrived +%ds..+%ds: %s", what, k*5, k*5+5, l)
		}
	}
}
