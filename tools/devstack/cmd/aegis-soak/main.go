// Command aegis-soak is `make soak`: the whole suite with the real
// binaries under a steady load of signed payment webhooks at 70 % of its
// sustainable end-to-end credit rate for a long time, retention scaled
// down so that it runs, and whether its performance lasts: throughput and
// latency per window, table sizes, vacuums, the hot statements' plans and
// CPU per process (tools/devstack/internal/bench, soak*.go).
//
//	aegis-soak [-duration 10m] [-rate N] [-out docs/reports/soak.md]
//
// The chaos soak (a long run at a moderate fault rate, invariants checked)
// is `make chaos PROFILE=soak`, aegis-chaos's soak profile.
package main

import (
	"context"
	"encoding/json"
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

// keepMarker starts the part of the -out file a run keeps: findings
// written by hand below the generated report.
const keepMarker = "<!-- findings: kept by make soak -->"

func main() {
	ok, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "aegis-soak:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func run() (bool, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	duration := flag.Duration("duration", 10*time.Minute, "length of the steady load")
	rate := flag.Float64("rate", 0, "offered webhooks per second (default: -share of the sustainable rate a step search finds)")
	share := flag.Float64("share", 0.7, "share of the sustainable rate to offer")
	step := flag.Duration("step", bench.SoakStep, "length of each step of the search")
	window := flag.Duration("window", 0, "reporting window (default 5m; a run shorter than six windows is cut into six)")
	sample := flag.Duration("sample", time.Minute, "how often table sizes, vacuum counters and plans are read")
	scale := flag.Float64("time-scale", bench.SoakTimeScale, "divides the services' retention settings (1: their defaults)")
	keep := flag.Bool("keep", false, "keep the soak's database (aegis_soak) for inspection")
	profiles := flag.String("profiles", "", "write each service's CPU profile of the first and the last window to this directory")
	out := flag.String("out", "", "write the report to this Markdown file (and the plot beside it)")
	plot := flag.String("plot", "", "write the SVG plot to this file (default: soak.svg beside -out)")
	note := flag.String("note", "", "a sentence for the report under the command (e.g. that the machine was shared)")
	binDir := flag.String("bin", "bin", "directory with the binaries (make build)")
	logs := flag.String("logs", "", "write the processes' logs to this file")
	saveTo := flag.String("json", "", "write the run's measurements to this JSON file (for -render)")
	render := flag.String("render", "", "write the report from a -json file of an earlier run instead of running (-out, -plot, -note apply)")
	version := flag.Bool("version", false, "print the build and exit")
	flag.Parse()
	if *version {
		fmt.Println(buildinfo.Get().String("aegis-soak"))
		return true, nil
	}
	if flag.NArg() > 0 {
		return false, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	admin := os.Getenv("BENCH_DATABASE_URL")
	if admin == "" {
		admin = "postgres://127.0.0.1:5432/postgres?sslmode=disable"
	}
	redis := os.Getenv("REDIS_URL")
	if redis == "" {
		redis = "redis://127.0.0.1:6379/0"
	}
	if *render != "" {
		var sv saved
		b, err := os.ReadFile(*render)
		if err == nil {
			err = json.Unmarshal(b, &sv)
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", *render, err)
		}
		if sv.Result == nil {
			return false, fmt.Errorf("read %s: no soak result in it", *render)
		}
		if err := sv.Result.ReadProfiles(); err != nil {
			return false, err
		}
		return sv.Result.OK, report(sv, *out, *plot, *note)
	}
	cfg := bench.Config{BinDir: *binDir, AdminURL: admin, RedisURL: redis, Progress: os.Stderr}
	if *logs != "" {
		f, err := os.Create(*logs)
		if err != nil {
			return false, err
		}
		defer f.Close()
		cfg.Logs = f
	}
	release, err := bench.Exclusive(ctx, admin)
	if err != nil {
		return false, err
	}
	defer release()
	machine := bench.Machine(ctx, admin)
	res, err := bench.New(cfg).Soak(ctx, bench.SoakConfig{Duration: *duration, Rate: *rate, Share: *share, StepDuration: *step,
		Window: *window, Sample: *sample, TimeScale: *scale, Keep: *keep, ProfileDir: *profiles})
	if err != nil {
		return false, err
	}
	cmd := "make soak DURATION=" + duration.String()
	if fl := soakFlags(); fl != "" {
		cmd += " SOAK_FLAGS=\"" + fl + "\""
	}
	sv := saved{Machine: machine, Command: cmd, Result: res}
	if *saveTo != "" {
		b, err := json.Marshal(sv)
		if err == nil {
			err = os.WriteFile(*saveTo, b, 0o644)
		}
		if err != nil {
			return false, fmt.Errorf("write %s: %w", *saveTo, err)
		}
	}
	if err := report(sv, *out, *plot, *note); err != nil {
		return false, err
	}
	fmt.Fprintf(os.Stderr, "aegis-soak: %s\n", res.Why)
	return res.OK, nil
}

// saved is a run's measurements with where and how it ran (-json,
// -render).
type saved struct {
	Machine, Command string
	Result           *bench.SoakResult
}

// report prints the report and writes it to out (keeping the findings
// below keepMarker) with its plot, when they are set.
func report(sv saved, out, plot, note string) error {
	if plot == "" && out != "" {
		plot = filepath.Join(filepath.Dir(out), "soak.svg")
	}
	plotRef := ""
	if plot != "" {
		if err := os.WriteFile(plot, []byte(sv.Result.SoakPlot()), 0o644); err != nil {
			return fmt.Errorf("write the plot: %w", err)
		}
		if out != "" {
			if rel, err := filepath.Rel(filepath.Dir(out), plot); err == nil {
				plotRef = rel
			}
		}
	}
	doc := sv.Result.Markdown(sv.Machine, sv.Command, plotRef, note)
	fmt.Println(doc)
	if out == "" {
		return nil
	}
	if old, err := os.ReadFile(out); err == nil {
		doc = keepFindings(doc, string(old))
	}
	return os.WriteFile(out, []byte(doc), 0o644)
}

// keepFindings appends to the regenerated doc what old holds from
// keepMarker on.
func keepFindings(doc, old string) string {
	if i := strings.Index(old, keepMarker); i >= 0 {
		return strings.TrimRight(doc, "\n") + "\n\n" + old[i:]
	}
	return doc
}

// soakFlags lists the flags set on the command line that change what is
// measured (not where it is written), as SOAK_FLAGS would pass them.
func soakFlags() string {
	var fl []string
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "duration", "out", "plot", "note", "bin", "logs", "keep", "json", "render", "profiles":
		default:
			fl = append(fl, "-"+f.Name+" "+f.Value.String())
		}
	})
	return strings.Join(fl, " ")
}
