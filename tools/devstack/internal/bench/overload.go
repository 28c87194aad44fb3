package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// overloadFactor is how many times the sustained rate the overload phase
// offers: the overload target is three times the sustainable rate.
const overloadFactor = 3

// overloadAnswered is the answer time every request of the overload phase
// must meet.
const overloadAnswered = time.Second

// overloadResult is one request of the overload phase.
type overloadResult struct {
	status     int
	retryAfter bool
	lat        time.Duration
	id         string
	err        error
}

// overload is a stress test beyond the overload target (which e2e.go's
// overload measures on the whole suite, at three times its sustainable
// credit rate): it offers webhook-api alone overloadFactor times the rate
// it sustained with 64 clients, open loop (each request at its scheduled time, whatever
// became of the earlier ones), for 30 s at the default 20 s phase. Every
// request must be answered within a second: accepted ones after their
// commit, the rest 503 with Retry-After; every 200 must be in the database;
// then 8 clients again must get the rate they had before.
func (r *Runner) overload(ctx context.Context, t *ingestTarget, pool *pgxpool.Pool, sustained, before float64) error {
	d := r.cfg.Duration * 3 / 2
	offered := overloadFactor * sustained
	n := int(offered * d.Seconds())
	r.progress("overload: %.0f webhooks/s (%d× the sustained %.0f/s) for %s, open loop", offered, overloadFactor, sustained, d)
	t.src.prepare(n)
	// In flight at once: what a second of the offered rate brings (n in
	// flight at the offered rate means the oldest was due at least n/rate
	// ago, so the cap is only reached once the service is already late).
	// Past it the next request waits for a place and is still sent, its
	// time counted from when it was due: nothing is counted unanswered
	// that was never sent. Connections stay at 1024, as a PSP's sender
	// would hold: one per in-flight request (5,652 in a run of 2026-11-23)
	// made answers slower for everyone on 2 cores, shed ones included.
	capacity := max(4096, int(offered*overloadAnswered.Seconds()))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 1024}}
	defer client.CloseIdleConnections()
	results := make([]overloadResult, n)
	inflight := make(chan struct{}, capacity)
	heldBack := 0
	interval := time.Duration(float64(time.Second) / offered)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		if wait := time.Until(at); wait > 0 {
			time.Sleep(wait)
		}
		select {
		case inflight <- struct{}{}:
		default:
			heldBack++
			select {
			case inflight <- struct{}{}:
			case <-ctx.Done():
				wg.Wait()
				return ctx.Err()
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-inflight }()
			status, h, id, err := t.post(ctx, client)
			results[i] = overloadResult{status: status, lat: time.Since(at), id: id, err: err,
				retryAfter: h.Get("Retry-After") != ""}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	var (
		inTime, shedNoRetry int
		okIDs               []string
		okLat, shedLat      []time.Duration
		others              = map[string]int{}
	)
	for _, res := range results {
		if res.err == nil && res.lat <= overloadAnswered {
			inTime++
		}
		switch {
		case res.err != nil:
			others[res.err.Error()]++
		case res.status == http.StatusOK:
			okIDs = append(okIDs, res.id)
			okLat = append(okLat, res.lat)
		case res.status == http.StatusServiceUnavailable:
			shedLat = append(shedLat, res.lat)
			if !res.retryAfter {
				shedNoRetry++
			}
		default:
			others[fmt.Sprintf("status %d", res.status)]++
		}
	}
	var stored int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM webhook_events WHERE provider = 'stripe' AND event_id = ANY($1)", okIDs).Scan(&stored); err != nil {
		return err
	}
	lost := len(okIDs) - stored
	sortDurations(okLat)
	sortDurations(shedLat)
	pct := 100 * float64(inTime) / float64(n)
	r.add(Row{"overload", fmt.Sprintf("stress beyond target 3 (that is the e2e overload row): webhook-api alone, %d× its own 64-client rate (%.0f webhooks/s offered, open loop, load tool on the same 2 cores) for %s: answered within 1 s", overloadFactor, offered, d.Round(time.Second)),
		fmt.Sprintf("%.2f%% of %d (other outcomes: %v; sent late because %d were unanswered: %d)", pct, n, others, capacity, heldBack), "100%", verdict(inTime == n)})
	r.add(Row{"overload", "accepted (200 after commit) and shed (503 with Retry-After), per second; p99 answer time",
		fmt.Sprintf("%.0f /s accepted (p99 %s), %.0f /s shed (p99 %s, %d without Retry-After)",
			float64(len(okIDs))/elapsed.Seconds(), ms(percentile(okLat, 0.99)), float64(len(shedLat))/elapsed.Seconds(), ms(percentile(shedLat, 0.99)), shedNoRetry),
		"503s carry Retry-After", verdict(shedNoRetry == 0 && len(okIDs) > 0)})
	r.add(Row{"overload", "acknowledged webhooks missing from webhook_events", fmt.Sprintf("%d of %d", lost, len(okIDs)), "0", verdict(lost == 0)})

	r.progress("overload: load dropped; %d clients again", benchClients)
	t.src.prepare(int(r.cfg.Duration.Seconds()*10_000) + 1000)
	after, _, err := t.measure(ctx, benchClients, max(2*time.Second, r.cfg.Duration/2))
	if err != nil {
		return fmt.Errorf("after the overload: %w", err)
	}
	r.add(Row{"overload", fmt.Sprintf("right after it, %d clients: webhooks/s against the same before it", benchClients),
		fmt.Sprintf("%.0f /s = %.2f× %.0f /s", after, after/before, before), "≥ 0.8× (full speed again)", verdict(after/before >= 0.8)})
	return nil
}
