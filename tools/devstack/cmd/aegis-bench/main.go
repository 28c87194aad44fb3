// Command aegis-bench is `make bench`: it measures the performance
// targets with the real binaries on this machine and prints one table
// (see tools/devstack/internal/bench).
//
//	aegis-bench [-duration 20s] [-out docs/reports/benchmarks.md] [scenario ...]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aegis-payments/aegis/pkg/buildinfo"
	"github.com/aegis-payments/aegis/tools/devstack/internal/bench"
)

// keepMarker starts the part of the -out file that a run keeps: the
// findings written by hand, which the table above them is regenerated
// beside.
const keepMarker = "<!-- findings: kept by make bench -->"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "aegis-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	duration := flag.Duration("duration", 20*time.Second, "length of each timed load phase")
	out := flag.String("out", "", "write the table with the machine description to this Markdown file")
	binDir := flag.String("bin", "bin", "directory with the binaries (make build)")
	logs := flag.String("logs", "", "write the processes' logs to this file")
	plot := flag.String("plot", "", "write the e2e scenario's SVG plot to this file (default: bench-e2e.svg beside -out)")
	version := flag.Bool("version", false, "print the build and exit")
	flag.Parse()
	if *version {
		fmt.Println(buildinfo.Get().String("aegis-bench"))
		return nil
	}

	admin := os.Getenv("BENCH_DATABASE_URL")
	if admin == "" {
		admin = "postgres://127.0.0.1:5432/postgres?sslmode=disable"
	}
	redis := os.Getenv("REDIS_URL")
	if redis == "" {
		redis = "redis://127.0.0.1:6379/0"
	}
	if *plot == "" && *out != "" {
		*plot = filepath.Join(filepath.Dir(*out), "bench-e2e.svg")
	}
	cfg := bench.Config{BinDir: *binDir, AdminURL: admin, RedisURL: redis, Duration: *duration, Progress: os.Stderr, PlotPath: *plot}
	if *logs != "" {
		f, err := os.Create(*logs)
		if err != nil {
			return err
		}
		defer f.Close()
		cfg.Logs = f
	}
	release, err := bench.Exclusive(ctx, admin)
	if err != nil {
		return err
	}
	defer release()
	machine := bench.Machine(ctx, admin)
	rows, err := bench.New(cfg).Run(ctx, flag.Args())
	table := bench.Table(rows)
	fmt.Printf("\n%s\n\nMachine: %s\n", table, machine)
	if err != nil {
		return err
	}
	if *out == "" {
		return nil
	}
	cmd := "make bench"
	if len(flag.Args()) > 0 {
		cmd += " SCENARIOS=\"" + strings.Join(flag.Args(), " ") + "\""
	}
	doc := fmt.Sprintf(`# Benchmarks

Latest figures from `+"`%s`"+` (%s, %s per load phase). Each scenario runs the
real binaries against a fresh database on the local Postgres and kfake;
nothing else runs on the machine meanwhile.

Machine: %s.

%s
Ingest runs one webhook-api process at its default settings
([configuration](../reference/configuration.md)), loaded by 8 and by 64 clients, each run beside two
pgbench runs of the same two inserts at the same concurrency: on the
schema's own tables, and on two bare tables with primary keys only.

Outbound runs one outbox-relay (publishing, intake and dispatcher at their
defaults; http and loopback endpoints allowed) and kfake against a fresh
database with one endpoint: a receiver in the bench process that verifies
every delivery with the Standard Webhooks library. Its first row is the rate
at which a backlog of 5,000 payout.succeeded events committed at once
reaches the receiver (from the commit to the last verified arrival), against
the bare pgbench measured just before; its second, the latency from each
event's outbox commit to its verified arrival at a steady half that rate.

How each figure is made: tools/devstack/internal/bench (doc.go and the
scenario files say what is sent, how it is timed and what is checked).
How long the speed lasts (the e2e suite at 70 %% of its sustainable credit
rate for an hour, retention active; sizes, vacuums and plans over time):
[soak](soak.md), written by `+"`make soak`"+`.
`, cmd, time.Now().UTC().Format("2006-01-02"), duration.String(), machine, table)
	if old, err := os.ReadFile(*out); err == nil {
		doc = keepFindings(doc, string(old))
	}
	return os.WriteFile(*out, []byte(doc), 0o644)
}

// keepFindings appends to the regenerated doc what old holds from
// keepMarker on: the findings written by hand below the table.
func keepFindings(doc, old string) string {
	if i := strings.Index(old, keepMarker); i >= 0 {
		return doc + "\n" + old[i:]
	}
	return doc
}
