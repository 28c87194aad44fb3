// Command aegis-chaos is `make chaos` (with -profile soak the chaos soak,
// `make chaos PROFILE=soak`): it runs the suite under seeded faults and
// checks the three promises' invariants
// (tools/devstack/internal/chaos). It exits 1 on any violation and prints
// the seed that reproduces it.
//
//	aegis-chaos [-profile short|full|soak|week] [-seed N ...] [-duration D]
//
// The week profile compresses seven days into minutes (chaos.WeekScale;
// -print-scale lists every duration it scales). -plant-late-attempt
// builds payout-worker with -tags chaos into bin/chaos/ (never into the
// production binaries' directory) and starts the workers with
// AEGIS_PLANT_LATE_FIRST_ATTEMPT=1, the old ordering of the first
// attempt's record: the week profile must then report a double payment.
// -plant-poison runs the same chaos-tagged build with
// AEGIS_PLANT_POISON_RETRY=1, Postgres refusals retried in place for ever:
// the poison check must then fail.
//
// KAFKA_MEMBER_EXPIRY=off in its environment is passed to aegis-kafka: it
// turns off the member reaper that makes kfake expire dead consumer-group
// members as Apache Kafka does, so a run shows what the crash-loop faults
// catch without it (docs/kfake.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aegis-payments/aegis/pkg/buildinfo"
	"github.com/aegis-payments/aegis/tools/devstack/internal/bench"
	"github.com/aegis-payments/aegis/tools/devstack/internal/chaos"
)

// keptSection starts the hand-written part of docs/reports/reliability.md that a
// soak run's rewrite keeps.
const keptSection = "## No unbounded in-place retry"

func main() {
	ok, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "aegis-chaos:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func run() (bool, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	profileName := flag.String("profile", "full", "short, full, soak or week")
	seeds := flag.String("seeds", "", "space- or comma-separated seeds (default: one from the clock)")
	duration := flag.Duration("duration", 0, "override the profile's workload duration")
	binDir := flag.String("bin", "bin", "directory with the binaries (make build)")
	logs := flag.String("logs", "", "write every process's output to this file")
	keep := flag.Bool("keep", false, "keep the run's database for inspection")
	out := flag.String("out", "", "write the (first) run's report with its footprint and lag to this Markdown file")
	pickupBound := flag.Duration("pickup-bound", 0, "fail when a payout or credit waited longer to be picked up (default: session timeout + 2× relay poll interval + the longest Kafka outage injected)")
	plantPoison := flag.Bool("plant-poison", false, "run payout-worker built with -tags chaos and "+chaos.PlantPoisonRetryEnv+
		"=1 (Postgres refusals retried in place for ever): the run must fail")
	noOperator := flag.Bool("no-operator", false, "plant the NEEDS_REVIEW payouts but resolve none of them: the run must fail (invariant 3)")
	plantLate := flag.Bool("plant-late-attempt", false, "run payout-worker built with -tags chaos and "+chaos.PlantLateFirstAttemptEnv+
		"=1 (first_attempt_at saved after the PSP call, the old ordering): the week profile must report a double payment")
	printScale := flag.Bool("print-scale", false, "print the durations the profile scales, with their real and scaled values, and exit")
	version := flag.Bool("version", false, "print the build and exit")
	flag.Parse()
	if *version {
		fmt.Println(buildinfo.Get().String("aegis-chaos"))
		return true, nil
	}

	profile, err := chaos.ProfileNamed(*profileName)
	if err != nil {
		return false, err
	}
	if *printScale {
		fmt.Print(chaos.ScaleTable(profile.TimeScale))
		return true, nil
	}
	var workerBin string
	workerEnv := map[string]string{}
	if *plantLate {
		workerEnv[chaos.PlantLateFirstAttemptEnv] = "1"
	}
	if *plantPoison {
		workerEnv[chaos.PlantPoisonRetryEnv] = "1"
	}
	if len(workerEnv) > 0 {
		if workerBin, err = buildPlantedWorker(ctx, *binDir); err != nil {
			return false, err
		}
	}
	if *duration > 0 {
		profile.Duration = *duration
	}
	var list []uint64
	for _, f := range strings.FieldsFunc(*seeds, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return false, fmt.Errorf("seed %q: %w", f, err)
		}
		list = append(list, n)
	}
	if len(list) == 0 {
		list = []uint64{uint64(time.Now().UnixNano() % 1_000_000)}
	}
	admin := os.Getenv("CHAOS_DATABASE_URL")
	if admin == "" {
		admin = "postgres://127.0.0.1:5432/postgres?sslmode=disable"
	}
	var logw = io.Discard
	if *logs != "" {
		f, err := os.Create(*logs)
		if err != nil {
			return false, err
		}
		defer f.Close()
		logw = f
	}
	// KAFKA_MEMBER_EXPIRY=off reaches aegis-kafka: the planted ghost-member
	// bug (docs/kfake.md) the crash-loop faults must then catch.
	var kafkaEnv map[string]string
	if v := os.Getenv("KAFKA_MEMBER_EXPIRY"); v != "" {
		kafkaEnv = map[string]string{"KAFKA_MEMBER_EXPIRY": v}
	}
	allOK := true
	for i, seed := range list {
		rep, err := chaos.Run(ctx, chaos.Config{BinDir: *binDir, AdminURL: admin, Profile: profile, Seed: seed,
			Logs: logw, Progress: os.Stderr, Keep: *keep, KafkaEnv: kafkaEnv, PickupBound: *pickupBound,
			NoOperator: *noOperator, WorkerBin: workerBin, WorkerEnv: workerEnv})
		if err != nil {
			return false, fmt.Errorf("seed %d: %w", seed, err)
		}
		fmt.Println(rep)
		allOK = allOK && rep.OK()
		if *out != "" && i == 0 {
			cmd := "make chaos PROFILE=" + profile.Name
			if profile.Name == "soak" {
				cmd += " DURATION=" + profile.Duration.String()
			}
			doc := rep.Reliability(bench.Machine(ctx, admin), cmd)
			// Hand-written sections after the generated report are kept.
			if old, err := os.ReadFile(*out); err == nil {
				if i := strings.Index(string(old), keptSection); i >= 0 {
					doc = strings.TrimRight(doc, "\n") + "\n\n" + string(old[i:])
				}
			}
			if err := os.WriteFile(*out, []byte(doc), 0o644); err != nil {
				return false, err
			}
		}
	}
	return allOK, nil
}

// buildPlantedWorker builds payout-worker with the chaos build tag into
// binDir/chaos, apart from the binaries make build ships, and returns its
// path. It runs from the repository root (where make runs aegis-chaos).
func buildPlantedWorker(ctx context.Context, binDir string) (string, error) {
	out, err := filepath.Abs(filepath.Join(binDir, "chaos", "payout-worker"))
	if err != nil {
		return "", err
	}
	// A branch without the chaos-tagged files builds the ordinary worker:
	// the switch then does nothing, which the run's result must not hide.
	files := func(tags ...string) string {
		args := append([]string{"list"}, tags...)
		b, err := exec.CommandContext(ctx, "go", append(args, "-f", "{{.GoFiles}}", "./services/payout-worker/...")...).Output()
		if err != nil {
			return ""
		}
		return string(b)
	}
	if plain, tagged := files(), files("-tags", "chaos"); plain != "" && plain == tagged {
		fmt.Fprintln(os.Stderr, "aegis-chaos: warning: payout-worker has no file built only with -tags chaos on this branch: "+
			"the planted defects plant nothing, and the run shows the worker as it is")
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "chaos", "-o", out, "./services/payout-worker")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build -tags chaos ./services/payout-worker (run from the repository root): %w", err)
	}
	return out, nil
}
