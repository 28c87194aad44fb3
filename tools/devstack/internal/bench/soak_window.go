package bench

import (
	"fmt"
	"time"
)

// soakWindowLen is the soak's reporting window.
const soakWindowLen = 5 * time.Minute

// soakMinWindows is how many windows a run shorter than soakMinWindows ×
// soakWindowLen is cut into instead (and said so in the report): a first
// and a last window must exist to compare, and a few between them to see a
// trend.
const soakMinWindows = 6

// windowFor is the window length of a soak of d: soakWindowLen, or d cut
// into soakMinWindows equal windows (to the second) when that is too few.
func windowFor(d time.Duration) time.Duration {
	if d >= soakMinWindows*soakWindowLen {
		return soakWindowLen
	}
	w := (d / soakMinWindows).Round(time.Second)
	return max(w, time.Second)
}

// soakReq is what became of one webhook of the soak. Times are offsets
// from the soak's start: when it was due, answered and credited.
type soakReq struct {
	due, ackAt, creditAt time.Duration
	// answered: any HTTP answer came; acked: it was 200; credited: its
	// ledger credit was found.
	answered, acked, credited bool
}

// soakWindow is one reporting window of the soak: throughput of what
// happened in it, and the latency and errors of the webhooks due in it.
type soakWindow struct {
	Start, End time.Duration
	// Per second over the window: webhooks due (offered), answered 200
	// (acknowledged) and credits committed in it.
	Offered, Acked, Credited float64
	// P50 and P99 of due → credited of the webhooks due in the window
	// and credited.
	P50, P99 time.Duration
	// Errors: webhooks due in the window not answered 200; NotCredited:
	// acknowledged but never credited.
	Errors, NotCredited int
	// Usage is each process's CPU and memory over the window.
	Usage []procUsage
}

// soakWindows cuts a soak of total (the load's length; answers and
// credits after it, while the backlog drains, count in the last window)
// into windows of w and computes each window's figures.
func soakWindows(reqs []soakReq, w, total time.Duration) []soakWindow {
	if w <= 0 || total <= 0 {
		return nil
	}
	n := int((total + w - 1) / w)
	out := make([]soakWindow, n)
	offered := make([]int, n)
	acked := make([]int, n)
	credited := make([]int, n)
	lat := make([][]time.Duration, n)
	at := func(t time.Duration) int { return min(max(int(t/w), 0), n-1) }
	for _, r := range reqs {
		i := at(r.due)
		offered[i]++
		if !r.acked {
			out[i].Errors++
			continue
		}
		acked[at(r.ackAt)]++
		if !r.credited {
			out[i].NotCredited++
			continue
		}
		credited[at(r.creditAt)]++
		lat[i] = append(lat[i], max(0, r.creditAt-r.due))
	}
	for i := range out {
		out[i].Start = time.Duration(i) * w
		out[i].End = min(out[i].Start+w, total)
		secs := (out[i].End - out[i].Start).Seconds()
		out[i].Offered = float64(offered[i]) / secs
		out[i].Acked = float64(acked[i]) / secs
		out[i].Credited = float64(credited[i]) / secs
		sortDurations(lat[i])
		out[i].P50, out[i].P99 = percentile(lat[i], 0.5), percentile(lat[i], 0.99)
	}
	return out
}

// soakTolerance is how far the last window may be from the first before
// the soak calls it decay: 10 %.
const soakTolerance = 0.10

// soakVerdict compares the last window with the first: the credited
// throughput must be within soakTolerance of the first's (the load is
// open loop: a suite keeping up credits what is offered), and the p99 no
// more than soakTolerance above it (a lower p99 is no decay). Errors or
// uncredited webhooks anywhere fail it too.
func soakVerdict(ws []soakWindow) (ok bool, why string) {
	if len(ws) < 2 {
		return false, "fewer than two windows: nothing to compare"
	}
	first, last := ws[0], ws[len(ws)-1]
	var errs, lost int
	for _, w := range ws {
		errs += w.Errors
		lost += w.NotCredited
	}
	thr := change(first.Credited, last.Credited)
	p99 := change(first.P99.Seconds(), last.P99.Seconds())
	why = fmt.Sprintf("credited %.1f → %.1f /s (%+.1f %%), p99 %s → %s (%+.1f %%), %d errors, %d acknowledged not credited",
		first.Credited, last.Credited, 100*thr, ms(first.P99), ms(last.P99), 100*p99, errs, lost)
	ok = first.Credited > 0 && thr >= -soakTolerance && thr <= soakTolerance && p99 <= soakTolerance && errs == 0 && lost == 0
	return ok, why
}

// change is b relative to a: (b − a) / a (0 when both are 0).
func change(a, b float64) float64 {
	if a == 0 {
		if b == 0 {
			return 0
		}
		return 1
	}
	return (b - a) / a
}
