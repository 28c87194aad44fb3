package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

// ServiceSample is one service process's footprint, from its /metrics.
type ServiceSample struct {
	Name       string
	RSSMiB     float64
	Goroutines int
	// Started is the process's start time (unix seconds): a change between
	// two samples means the process was killed and restarted meanwhile.
	Started float64
}

// LagSample is the pipeline's state at one moment of the run.
type LagSample struct {
	At          time.Duration
	Unpublished int
	OldestAgeS  float64
	AckedPerSec float64
	Footprint   []ServiceSample
}

// services lists the processes whose footprint is sampled, with their ports.
func (su *suite) services() map[string]int {
	p := su.ports
	return map[string]int{
		"webhook-api": p.WebhookAPI, "dlq-admin": p.DLQAdmin,
		"outbox-relay": p.OutboxRelay, "outbox-relay-2": p.OutboxRelay + 100,
		"payout-worker": p.PayoutWorker, "payout-worker-2": p.PayoutWorker + 100,
	}
}

func (su *suite) footprint(ctx context.Context) []ServiceSample {
	var out []ServiceSample
	for name, port := range su.services() {
		m := scrape(ctx, stack.URL(port)+"/metrics")
		if m == nil {
			continue
		}
		out = append(out, ServiceSample{Name: name, RSSMiB: m["process_resident_memory_bytes"] / (1 << 20),
			Goroutines: int(m["go_goroutines"]), Started: m["process_start_time_seconds"]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// scrape reads the unlabelled gauges of a Prometheus text page.
func scrape(ctx context.Context, url string) map[string]float64 {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.HasPrefix(f[0], "#") || strings.Contains(f[0], "{") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = v
		}
	}
	return out
}

// sample records the pipeline's lag and throughput every interval until ctx
// ends.
func (su *suite) sample(ctx context.Context, wl *workload, every time.Duration, rep *Report) {
	start := time.Now()
	lastAcked, last := 0, start
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var unpublished int
		var oldest float64
		_ = su.pool.QueryRow(context.WithoutCancel(ctx), `SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)
			FROM transaction_outbox WHERE finished_at IS NULL`).Scan(&unpublished, &oldest)
		acked := wl.acknowledged()
		now := time.Now()
		rep.Lag = append(rep.Lag, LagSample{At: now.Sub(start).Round(time.Second), Unpublished: unpublished,
			OldestAgeS: oldest, AckedPerSec: float64(acked-lastAcked) / now.Sub(last).Seconds(),
			Footprint: su.footprint(context.WithoutCancel(ctx))})
		lastAcked, last = acked, now
	}
}

func (w *workload) acknowledged() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, h := range w.webhooks {
		if h.Status/100 == 2 {
			n++
		}
	}
	return n
}

// Reliability renders a soak report for docs/reports/reliability.md.
func (r *Report) Reliability(machine, command string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Reliability\n\nLatest soak: `%s` (%s) on %s.\n\n", command, time.Now().UTC().Format("2006-01-02"), machine)
	fmt.Fprintf(&b, "Seed %d: %s of workload at %d ops/s with a fault every %s, then drain, replay of every open dead letter, "+
		"drain and the invariant checks (tools/devstack/internal/chaos); %s in all. Result: %d violations.\n",
		r.Seed, r.Duration, r.Rate, r.FaultEvery, r.Took.Round(time.Second), len(r.Violations))
	b.WriteString(r.String())

	b.WriteString("\n## Footprint of each service over the run\n\n")
	b.WriteString("RSS MiB / goroutines from each process's /metrics: before the workload, every sample during it, and after the final drain. " +
		"`*` marks a process that was SIGKILLed and restarted by a fault since the previous column.\n\n")
	type column struct {
		label string
		fp    []ServiceSample
	}
	columns := []column{{"before", r.StartFootprint}}
	for _, l := range r.Lag {
		columns = append(columns, column{l.At.String(), l.Footprint})
	}
	columns = append(columns, column{"drained", r.DrainedFootprint})
	names := map[string]bool{}
	for _, c := range columns {
		for _, s := range c.fp {
			names[s.Name] = true
		}
	}
	b.WriteString("| at |")
	for _, n := range sortedKeys(names) {
		b.WriteString(" " + n + " |")
	}
	b.WriteString("\n|---|")
	for range names {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	prev := map[string]float64{}
	for _, c := range columns {
		byName := map[string]ServiceSample{}
		for _, s := range c.fp {
			byName[s.Name] = s
		}
		b.WriteString("| " + c.label + " |")
		for _, n := range sortedKeys(names) {
			s, ok := byName[n]
			if !ok {
				b.WriteString(" down |")
				continue
			}
			mark := ""
			if p, seen := prev[n]; seen && p != s.Started {
				mark = " *"
			}
			prev[n] = s.Started
			fmt.Fprintf(&b, " %.1f / %d%s |", s.RSSMiB, s.Goroutines, mark)
		}
		b.WriteString("\n")
	}

	b.WriteString("\n## Outbox lag and throughput over time\n\nAcknowledged webhooks per second follow the offered load " +
		"(the profile's rate, of which webhooks are about two thirds); lag shows what the faults held back and how fast it drained.\n\n| at | unpublished rows | oldest unpublished (s) | webhooks acknowledged/s |\n|---|---|---|---|\n")
	for _, l := range r.Lag {
		fmt.Fprintf(&b, "| %s | %d | %.1f | %.1f |\n", l.At, l.Unpublished, l.OldestAgeS, l.AckedPerSec)
	}
	return b.String()
}
