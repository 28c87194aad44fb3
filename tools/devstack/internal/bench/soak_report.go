package bench

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Markdown renders the soak's report (docs/reports/soak.md): machine and
// command say where and how it ran, plot is the SVG's path relative to the
// report ("" leaves it out), note is said under the command (e.g. that the
// machine was shared).
func (s *SoakResult) Markdown(machine, command, plot, note string) string {
	var b strings.Builder
	date := s.Date
	if date.IsZero() {
		date = time.Now().UTC()
	}
	fmt.Fprintf(&b, "# Soak\n\nLatest soak: `%s` (%s) on %s.\n", command, date.Format("2006-01-02"), machine)
	if note != "" {
		fmt.Fprintf(&b, "\n%s\n", note)
	}
	verdict := "**holds**"
	if !s.OK {
		verdict = "**decays or fails**"
	}
	fmt.Fprintf(&b, "\nVerdict: %s — last window against the first: %s (holds: credited throughput within %.0f %%, p99 no more than %.0f %% higher, no errors, every acknowledged webhook credited).\n",
		verdict, s.Why, 100*soakTolerance, 100*soakTolerance)
	fmt.Fprintf(&b, "Machine load (1-minute load average, 2 cores) at the start / end: %s / %s.\n", s.LoadStart, s.LoadEnd)

	b.WriteString("\n## Rate\n\n")
	if len(s.Steps) == 0 {
		fmt.Fprintf(&b, "Offered %.0f webhooks/s, open loop, as given (`-rate`); no step search.\n", s.Rate)
	} else {
		var trace []string
		for _, st := range s.Steps {
			mark := "held"
			if !st.ok() {
				mark = fmt.Sprintf("not held: p99 %s, %d of %d credited, %d failed", ms(st.P99), st.Done, st.Acked, st.Failures)
			}
			trace = append(trace, fmt.Sprintf("%.0f /s %s", st.Offered, mark))
		}
		fmt.Fprintf(&b, "Step search (the e2e scenario's steps: fractions of a bare two-table pgbench, %.0f tx/s, each held %s; "+
			"a step holds when every acknowledged webhook is credited with p99 ≤ 1 s): %s.\n\n"+
			"Sustainable: %.0f /s. Soaked at %.0f %% of it: **%.0f webhooks/s**, open loop, for %s (%d webhooks).\n",
			s.Bare, s.Config.StepDuration, strings.Join(trace, "; "), s.Sustainable, 100*s.Config.Share, s.Rate, s.Config.Duration, s.Sent)
	}
	fmt.Fprintf(&b, "After the load, the backlog was credited in %s.\n", s.Drain.Round(time.Second))

	b.WriteString("\n## Retention\n\n")
	if s.Config.TimeScale <= 1 {
		b.WriteString("The services' retention settings at their defaults (`-time-scale 1`).\n")
	} else {
		fmt.Fprintf(&b, "Every retention setting, and what the services' config requires it to outlast, divided by one factor (%g: a day of retention in %s of wall time), so the config's rules hold as at the defaults:\n\n",
			s.Config.TimeScale, (24 * time.Hour / time.Duration(s.Config.TimeScale)).Round(time.Second))
		b.WriteString("| setting | read by | default | in the soak |\n|---|---|---|---|\n")
		for _, r := range s.Retention {
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.Env, r.Reader, r.Real, r.Value)
		}
		fmt.Fprintf(&b, "\nThe partition policies are scaled by the same factor (`partition_policies.time_scale`, set by "+
			"`rescale_partitions` on the fresh database): a partition spans %s instead of a day, and each policy's premake, "+
			"retention and dedupe horizon shrink with it. Made and dropped during the run: under Table sizes.\n",
			(24 * time.Hour / time.Duration(s.Config.TimeScale)).Round(time.Millisecond))
	}

	b.WriteString("\n## Per window\n\n")
	if s.WindowScaled {
		fmt.Fprintf(&b, "Windows of %s (the run is shorter than %d windows of %s, so it is cut into %d). ", s.Window, soakMinWindows, soakWindowLen, soakMinWindows)
	} else {
		fmt.Fprintf(&b, "Windows of %s. ", s.Window)
	}
	b.WriteString("Offered, acknowledged and credited are per second of what happened in the window (webhooks due, answered 200, " +
		"credits committed; what the drain credited after the load counts in the last window); latency is from each webhook's due time " +
		"to its credit's commit, for the webhooks due in the window; errors: not answered 200.\n\n")
	b.WriteString("| window | offered /s | acknowledged /s | credited /s | p50 | p99 | errors | not credited | CPU (cores, all processes) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, w := range s.Windows {
		var cores float64
		for _, u := range w.Usage {
			cores += u.Cores
		}
		fmt.Fprintf(&b, "| %s–%s | %.1f | %.1f | %.1f | %s | %s | %d | %d | %.2f |\n",
			clock(w.Start), clock(w.End), w.Offered, w.Acked, w.Credited, ms(w.P50), ms(w.P99), w.Errors, w.NotCredited, cores)
	}
	if plot != "" {
		fmt.Fprintf(&b, "\n![throughput, latency and table sizes per window](%s)\n", plot)
	}

	b.WriteString("\n## CPU per process\n\n")
	b.WriteString("CPU time over wall time per window (1.00 is one core busy; /proc, as `make bench` measures it); " +
		"RSS at the last window's end (Postgres: its backends' private memory).\n\n")
	b.WriteString(usageTable(s.Windows))
	b.WriteString(profileSection(s.Profiles))

	b.WriteString("\n## Table sizes\n\n")
	b.WriteString(sizeSection(s.Samples))
	b.WriteString(partitionSection(s.Samples))

	b.WriteString("\n## Vacuum and analyze\n\n")
	if s.Autovacuum {
		b.WriteString("The server runs autovacuum: the autovacuum columns are its work.\n\n")
	} else {
		b.WriteString("This server runs with `autovacuum = off` (its CI configuration; no deployment does, and the setting is the " +
			"server's, not a database's): the soak vacuums (and analyzes) each table autovacuum would, by autovacuum's own rule, every " +
			"`autovacuum_naptime` (bench/autovacuum.go). Those are the vacuum and analyze columns; autovacuum's stay at 0.\n\n")
	}
	b.WriteString(vacuumTable(vacuumSummaries(s.Samples)))

	b.WriteString("\n## Plans of the hot statements\n\n")
	b.WriteString(planSection(s.Plans, s.Config.Sample))
	return b.String()
}

// clock renders an offset from the start as m:ss (or h:mm:ss).
func clock(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, sec := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, sec)
	}
	return fmt.Sprintf("%d:%02d", m, sec)
}

// mib renders bytes in MiB.
func mib(b int64) string {
	v := float64(b) / (1 << 20)
	if math.Abs(v) < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// usageTable is one row per process, one column per window, and the
// run's mean.
func usageTable(ws []soakWindow) string {
	if len(ws) == 0 {
		return "No windows.\n"
	}
	var names []string
	seen := map[string]bool{}
	for _, w := range ws {
		for _, u := range w.Usage {
			if !seen[u.Name] {
				seen[u.Name] = true
				names = append(names, u.Name)
			}
		}
	}
	var b strings.Builder
	b.WriteString("| process |")
	for _, w := range ws {
		fmt.Fprintf(&b, " %s |", clock(w.Start))
	}
	b.WriteString(" mean | RSS MiB |\n|---|")
	for range ws {
		b.WriteString("---|")
	}
	b.WriteString("---|---|\n")
	for _, n := range names {
		fmt.Fprintf(&b, "| %s |", n)
		var sum, secs, rss float64
		for _, w := range ws {
			found := false
			for _, u := range w.Usage {
				if u.Name == n {
					fmt.Fprintf(&b, " %.2f |", u.Cores)
					span := (w.End - w.Start).Seconds()
					sum += u.Cores * span
					secs += span
					rss = u.RSSMiB
					found = true
				}
			}
			if !found {
				b.WriteString(" — |")
			}
		}
		mean := 0.0
		if secs > 0 {
			mean = sum / secs
		}
		fmt.Fprintf(&b, " %.2f | %.0f |\n", mean, rss)
	}
	return b.String()
}

// sizeSection is the size table: each table that is or was at least
// 1 MiB or grew, at five moments, and whether it levels off.
func sizeSection(samples []tableSample) string {
	if len(samples) == 0 {
		return "No samples.\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pg_total_relation_size (heap, TOAST and indexes) and pg_indexes_size of every table, read every sample (%d samples; "+
		"a partitioned table summed over its partitions, pg_partition_root). A table levels off (plateau) when it grew by less than "+
		"%.0f %% of its size (or less than 1 MiB) over the run's last quarter. MiB, total (of which indexes):\n\n", len(samples), 100*plateauShare)
	points := trendPoints(samples)
	b.WriteString("| table |")
	for _, i := range points {
		fmt.Fprintf(&b, " %s |", clock(samples[i].At))
	}
	b.WriteString(" last quarter | plateau |\n|---|")
	for range points {
		b.WriteString("---|")
	}
	b.WriteString("---|---|\n")
	small := 0
	for _, t := range tableTrends(samples) {
		end := t.Total[len(t.Total)-1]
		if end < 1<<20 && t.Total[0] < 1<<20 && t.LastQuarter == 0 {
			small++
			continue
		}
		fmt.Fprintf(&b, "| %s |", t.Name)
		for k, v := range t.Total {
			fmt.Fprintf(&b, " %s (%s) |", mib(v), mib(t.Index[k]))
		}
		level := "yes"
		if !t.Plateau {
			level = fmt.Sprintf("**no**: %s MiB/min", mib(int64(t.PerMinute)))
		}
		fmt.Fprintf(&b, " %+.2f MiB | %s |\n", float64(t.LastQuarter)/(1<<20), level)
	}
	if small > 0 {
		fmt.Fprintf(&b, "\n%d more tables stayed under 1 MiB without growing over the last quarter.\n", small)
	}
	return b.String()
}

// partitionSection renders what the run did to the partitions of the
// tables kept by time partition (none: nothing).
func partitionSection(samples []tableSample) string {
	churns := partitionChurns(samples)
	if len(churns) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nPartitions of the tables kept by time partition (partition_policies; made ahead and dropped past the retention " +
		"by webhook-api's keeper, as in a deployment, at the policy's time scale):\n\n" +
		"| table | partition span | at the start: partitions, oldest from, newest to | at the end | made | dropped |\n|---|---|---|---|---|---|\n")
	span := func(p partitionSpan) string {
		oldest := "MINVALUE"
		if p.Oldest.Unix() != 0 {
			oldest = p.Oldest.UTC().Format("15:04:05")
		}
		return fmt.Sprintf("%d, %s, %s", p.Count, oldest, p.Newest.UTC().Format("15:04:05"))
	}
	for _, c := range churns {
		fmt.Fprintf(&b, "| %s | %s (time scale %d) | %s | %s | %d | %d |\n", c.Name, c.Width, c.Last.TimeScale, span(c.First), span(c.Last), c.Made, c.Dropped)
	}
	return b.String()
}

// vacuumTable renders the vacuum summaries.
func vacuumTable(vs []vacuumSummary) string {
	if len(vs) == 0 {
		return "No table was vacuumed or analyzed, and none had dead tuples.\n"
	}
	var b strings.Builder
	b.WriteString("| table | autovacuum | autoanalyze | vacuum | analyze | dead tuples, highest sample | dead tuples at the end | live tuples at the end |\n|---|---|---|---|---|---|---|---|\n")
	for _, v := range vs {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d |\n", v.Name, v.AutoVacuum, v.AutoAnalyze, v.Vacuum, v.Analyze, v.DeadMax, v.DeadEnd, v.LiveEnd)
	}
	return b.String()
}

// planSection summarizes the plans seen and shows each change with the
// plan before and after it.
func planSection(hs []planHistory, every time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Each hot statement EXPLAINed every %s, its text read from the sqlc-generated code, twice: its custom plan for "+
		"representative values, and its generic plan (PREPARE, EXPLAIN EXECUTE under force_generic_plan), the one a service's prepared "+
		"statement may switch to after five executions. A plan is its shape (nodes, relations, indexes, joins; no costs, rows or "+
		"values), fingerprinted. Not auto_explain: it needs the server's log and sees only the statements slower than its threshold, so "+
		"a plan that changed and stayed fast goes unseen (bench/soak_plans.go).\n\n", every)
	b.WriteString("| statement | service | plan | samples | plans (fingerprint from) | changes |\n|---|---|---|---|---|---|\n")
	changes := 0
	for _, h := range hs {
		var fps []string
		for _, s := range h.Seen {
			fps = append(fps, fmt.Sprintf("`%s` %s", s.Fingerprint, clock(s.At)))
		}
		if h.Err != "" {
			fps = append(fps, "error: "+strings.ReplaceAll(h.Err, "|", "\\|"))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %d |\n", h.Method, h.Service, h.Kind, h.Samples, strings.Join(fps, ", "), h.Changes())
		changes += h.Changes()
	}
	if changes == 0 {
		b.WriteString("\nNo plan changed during the soak.\n")
	}
	// Each change once in a table; each distinct change (from one plan to
	// another) once as a diff holding both plans whole: a plan that flips
	// back and forth all hour is two diffs, not a page per flip.
	for _, h := range hs {
		if h.Changes() == 0 {
			continue
		}
		noun := "plan changes"
		if h.Changes() == 1 {
			noun = "plan change"
		}
		fmt.Fprintf(&b, "\n### %s (%s), %s plan: %d %s\n\n| at | from | to |\n|---|---|---|\n", h.Method, h.Service, h.Kind, h.Changes(), noun)
		for i := 1; i < len(h.Seen); i++ {
			fmt.Fprintf(&b, "| %s | `%s` | `%s` |\n", clock(h.Seen[i].At), h.Seen[i-1].Fingerprint, h.Seen[i].Fingerprint)
		}
		shown := map[[2]string]bool{}
		for i := 1; i < len(h.Seen); i++ {
			prev, cur := h.Seen[i-1], h.Seen[i]
			key := [2]string{prev.Fingerprint, cur.Fingerprint}
			if shown[key] {
				continue
			}
			shown[key] = true
			fmt.Fprintf(&b, "\n`%s` → `%s` (first at %s; lines - only before, + only after):\n\n```diff\n%s```\n",
				prev.Fingerprint, cur.Fingerprint, clock(cur.At), lineDiff(prev.Shape, cur.Shape))
		}
	}
	if len(hs) > 0 && len(hs[0].Seen) > 0 {
		b.WriteString("\n<details><summary>The plans at the start</summary>\n\n")
		for _, h := range hs {
			if len(h.Seen) == 0 {
				continue
			}
			fmt.Fprintf(&b, "%s, %s plan (`%s`):\n\n```\n%s```\n\n", h.Method, h.Kind, h.Seen[0].Fingerprint, h.Seen[0].Shape)
		}
		b.WriteString("</details>\n")
	}
	return b.String()
}

// lineDiff renders b against a line by line: a longest common
// subsequence of lines kept with two spaces, the others with "- " (only in
// a) and "+ " (only in b).
func lineDiff(a, b string) string {
	x := strings.SplitAfter(strings.TrimSuffix(a, "\n"), "\n")
	y := strings.SplitAfter(strings.TrimSuffix(b, "\n"), "\n")
	for i := range x {
		x[i] = strings.TrimSuffix(x[i], "\n")
	}
	for i := range y {
		y[i] = strings.TrimSuffix(y[i], "\n")
	}
	// lcs[i][j]: the longest common subsequence of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			out.WriteString("  " + x[i] + "\n")
			i++
			j++
		case j < len(y) && (i == len(x) || lcs[i][j+1] > lcs[i+1][j]):
			out.WriteString("+ " + y[j] + "\n")
			j++
		default:
			out.WriteString("- " + x[i] + "\n")
			i++
		}
	}
	return out.String()
}

// SoakPlot draws the soak as SVG: throughput and latency per window, and
// the largest tables' sizes over time.
func (s *SoakResult) SoakPlot() string {
	const blue, orange, green, grey, red = "#1f77b4", "#ff7f0e", "#2ca02c", "#888", "#d62728"
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">Aegis soak: %.0f webhooks/s offered for %s, per window of %s</text>`+"\n",
		marginL, s.Rate, s.Config.Duration, s.Window)
	var xs, offered, credited, p50, p99 []float64
	xMax := math.Max(s.Config.Duration.Minutes(), 1)
	yMax, yLat := s.Rate, 1000.0
	for _, w := range s.Windows {
		x := (w.Start + w.End).Minutes() / 2
		xs = append(xs, x)
		offered = append(offered, w.Offered)
		credited = append(credited, w.Credited)
		p50 = append(p50, math.Max(float64(w.P50.Microseconds())/1000, 1))
		p99 = append(p99, math.Max(float64(w.P99.Microseconds())/1000, 1))
		yMax = math.Max(yMax, math.Max(w.Offered, w.Credited))
		yLat = math.Max(yLat, p99[len(p99)-1])
	}
	xMax = niceCeil(xMax)
	thr := panel{title: "throughput per window", xLabel: "minutes", yLabel: "per second", xMax: xMax, yMax: niceCeil(yMax * 1.1),
		series: []series{{name: "credited", color: blue, xs: xs, ys: credited}, {name: "offered", color: grey, dashed: true, xs: xs, ys: offered}}}
	lat := panel{title: "latency, webhook due → credited", xLabel: "minutes", yLabel: "ms (log)", xMax: xMax,
		yMin: 1, yMax: math.Pow(10, math.Ceil(math.Log10(yLat*1.5))), logY: true,
		series: []series{{name: "p99", color: orange, xs: xs, ys: p99}, {name: "p50", color: orange, dashed: true, xs: xs, ys: p50}},
		guides: []guide{{0, 1000, xMax, 1000, "1 s bound", red}}}
	thr.draw(&b, marginL, top)
	lat.draw(&b, marginL+panelW+100, top)

	// The largest tables at the end, their total size over the samples.
	if len(s.Samples) > 0 {
		last := s.Samples[len(s.Samples)-1].Tables
		var names []string
		for n := range last {
			names = append(names, n)
		}
		sort.Slice(names, func(i, j int) bool { return last[names[i]].Total > last[names[j]].Total })
		names = names[:min(len(names), 6)]
		colors := []string{blue, orange, green, red, "#9467bd", "#8c564b"}
		sizes := panel{title: "largest tables: total size (heap, TOAST, indexes)", xLabel: "minutes", yLabel: "MiB", xMax: xMax, yMax: 1}
		for i, n := range names {
			sr := series{name: n, color: colors[i]}
			for _, smp := range s.Samples {
				v := float64(smp.Tables[n].Total) / (1 << 20)
				sr.xs = append(sr.xs, smp.At.Minutes())
				sr.ys = append(sr.ys, v)
				sizes.yMax = math.Max(sizes.yMax, v)
			}
			sizes.series = append(sizes.series, sr)
		}
		sizes.xMax = niceCeil(math.Max(xMax, s.Samples[len(s.Samples)-1].At.Minutes()))
		sizes.yMax = niceCeil(sizes.yMax * 1.1)
		sizes.draw(&b, marginL, top+rowH)
	}
	// CPU per process per window: the processes that used any.
	cpu := panel{title: "CPU per process per window", xLabel: "minutes", yLabel: "cores", xMax: xMax, yMax: 0.1}
	colors := []string{blue, orange, green, red, "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"}
	var procs []string
	seen := map[string]bool{}
	for _, w := range s.Windows {
		for _, u := range w.Usage {
			if u.Cores >= 0.02 && !seen[u.Name] {
				seen[u.Name] = true
				procs = append(procs, u.Name)
			}
		}
	}
	for i, n := range procs {
		sr := series{name: n, color: colors[i%len(colors)]}
		for k, w := range s.Windows {
			for _, u := range w.Usage {
				if u.Name == n {
					sr.xs = append(sr.xs, xs[k])
					sr.ys = append(sr.ys, u.Cores)
					cpu.yMax = math.Max(cpu.yMax, u.Cores)
				}
			}
		}
		cpu.series = append(cpu.series, sr)
	}
	cpu.yMax = niceCeil(cpu.yMax * 1.1)
	cpu.draw(&b, marginL+panelW+100, top+rowH)
	b.WriteString("</svg>\n")
	return b.String()
}

// profileSection lists, per service, where its CPU went in each profiled
// window (the first and the last), side by side.
func profileSection(ps []SoakProfile) string {
	if len(ps) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n### Where the CPU went\n\n")
	fmt.Fprintf(&b, "A CPU profile of each service for %s in the middle of window", soakProfileLen)
	var names []string
	for _, p := range ps {
		names = append(names, strconv.Itoa(p.Window))
	}
	fmt.Fprintf(&b, "s %s (`go tool pprof -top` on the files: %s), as shares of the service's samples: Aegis's own "+
		"functions with the most CPU in themselves and what they call (cumulative: the stage), and the functions with the most "+
		"in themselves (flat: mostly the runtime and system calls).\n", strings.Join(names, " and "), "`"+filepath.Dir(firstFile(ps))+"`")
	services := map[string]bool{}
	for _, p := range ps {
		for _, t := range p.Tops {
			services[t.Service] = true
		}
	}
	for _, svc := range sortedKeys(services) {
		fmt.Fprintf(&b, "\n**%s**\n\n| window | CPU sampled | Aegis's heaviest (cumulative) | heaviest (flat) |\n|---|---|---|---|\n", svc)
		for _, p := range ps {
			for _, t := range p.Tops {
				if t.Service != svc {
					continue
				}
				cores := 0.0
				if t.Len > 0 {
					cores = t.CPU.Seconds() / t.Len.Seconds()
				}
				fmt.Fprintf(&b, "| %d | %s (%.2f cores) | %s | %s |\n", p.Window, t.CPU.Round(10*time.Millisecond), cores,
					shares(t.Own), shares(t.Top))
			}
		}
	}
	return b.String()
}

func shares(fs []FuncShare) string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("`%s` %.0f %%", f.Func, 100*f.Share))
	}
	return strings.Join(out, ", ")
}

func firstFile(ps []SoakProfile) string {
	for _, p := range ps {
		if len(p.Files) > 0 {
			return p.Files[0]
		}
	}
	return "."
}
