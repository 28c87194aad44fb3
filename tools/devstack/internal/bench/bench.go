package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

// Config says what to run against.
type Config struct {
	BinDir string
	// AdminURL is a Postgres URL on a database the user can create
	// databases from.
	AdminURL string
	RedisURL string
	// Duration of each timed load phase.
	Duration time.Duration
	// Logs receives the processes' output.
	Logs io.Writer
	// Progress receives one line per step.
	Progress io.Writer
	// PlotPath, if set, receives the e2e scenario's SVG plot.
	PlotPath string
}

// Row is one line of the result table.
type Row struct {
	Scenario, Metric, Result, Target, Verdict string
}

// Runner runs scenarios and collects rows.
type Runner struct {
	cfg  Config
	rows []Row
}

// New returns a Runner.
func New(cfg Config) *Runner {
	if cfg.Duration == 0 {
		cfg.Duration = 20 * time.Second
	}
	if cfg.Logs == nil {
		cfg.Logs = io.Discard
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	return &Runner{cfg: cfg}
}

// Scenarios in the order they run.
var scenarioNames = []string{"ingest", "relay", "worker", "backoff", "e2e", "outbound"}

// Scenarios lists the scenario names.
func Scenarios() []string { return append([]string(nil), scenarioNames...) }

// Run runs the named scenarios (all when names is empty).
func (r *Runner) Run(ctx context.Context, names []string) ([]Row, error) {
	if len(names) == 0 {
		names = Scenarios()
	}
	for _, n := range names {
		var err error
		switch n {
		case "pgbench":
			err = r.pgbench(ctx)
		case "ingest":
			err = r.ingest(ctx)
		case "relay":
			err = r.relay(ctx)
		case "worker":
			err = r.worker(ctx)
		case "backoff":
			err = r.backoff(ctx)
		case "e2e":
			err = r.e2e(ctx)
		case "outbound":
			err = r.outbound(ctx)
		default:
			err = fmt.Errorf("unknown scenario %q (have %s)", n, strings.Join(Scenarios(), ", "))
		}
		if err != nil {
			return r.rows, fmt.Errorf("%s: %w", n, err)
		}
	}
	return r.rows, nil
}

func (r *Runner) add(row Row) { r.rows = append(r.rows, row) }

func (r *Runner) progress(format string, args ...any) {
	fmt.Fprintf(r.cfg.Progress, "bench: "+format+"\n", args...)
}

// freshDB drops and creates a migrated database name and returns its URL
// and a pool on it.
func (r *Runner) freshDB(ctx context.Context, name string) (string, *pgxpool.Pool, error) {
	admin, err := pgx.Connect(ctx, r.cfg.AdminURL)
	if err != nil {
		return "", nil, fmt.Errorf("connect to %s: %w", r.cfg.AdminURL, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return "", nil, err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	u, _ := url.Parse(r.cfg.AdminURL)
	u.Path = "/" + name
	if _, err := migrations.Up(u.String()); err != nil {
		return "", nil, err
	}
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		return "", nil, err
	}
	return u.String(), pool, nil
}

func (r *Runner) newStack() *stack.Stack {
	return stack.New(stack.Config{BinDir: r.cfg.BinDir}, r.cfg.Logs)
}

// percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func sortDurations(d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// Machine describes where the benchmark ran.
func Machine(ctx context.Context, adminURL string) string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		_, _ = fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb)
		mem = fmt.Sprintf("%.0f GiB", float64(kb)/1024/1024)
	}
	pg := "PostgreSQL ?"
	if conn, err := pgx.Connect(ctx, adminURL); err == nil {
		var v string
		if conn.QueryRow(ctx, "SHOW server_version").Scan(&v) == nil {
			pg = "PostgreSQL " + v
		}
		conn.Close(ctx)
	}
	goVersion := runtime.Version()
	if out, err := exec.Command("go", "version").Output(); err == nil {
		goVersion = strings.TrimSpace(strings.TrimPrefix(string(out), "go version "))
	}
	return fmt.Sprintf("%d cores (%s), %s RAM, %s, %s, Kafka = kfake on the same machine", runtime.NumCPU(), cpu, mem, pg, goVersion)
}

// Table renders rows as a Markdown table.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| scenario | metric | result | target | |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.Scenario, r.Metric, r.Result, r.Target, r.Verdict)
	}
	return b.String()
}

// Exclusive makes this run the only bench or soak on the Postgres server:
// the scenarios' databases have fixed names, and a second run recreates them
// under the first — whose webhooks then land in the other's database and
// read as acknowledged but never stored or credited. It holds a
// session-level advisory lock until release.
func Exclusive(ctx context.Context, admin string) (release func(), err error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", admin, err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock(hashtext('aegis-bench'))").Scan(&ok); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("take the bench lock: %w", err)
	}
	if !ok {
		_ = conn.Close(ctx)
		return nil, errors.New("another aegis-bench or aegis-soak is running on this Postgres server (the same databases, the whole machine); wait for it")
	}
	return func() { _ = conn.Close(context.Background()) }, nil
}
