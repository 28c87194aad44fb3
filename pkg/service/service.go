package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/buildinfo"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/pkg/memlimit"
	"github.com/aegis-payments/aegis/pkg/telemetry"
)

// DefaultDatabaseURL is DATABASE_URL's default (docs/design/contract.md).
const DefaultDatabaseURL = "postgres://localhost:5432/aegis?sslmode=disable"

// Base holds the settings every service reads.
type Base struct {
	Name          string
	DatabaseURL   string
	HTTPAddr      string
	LogLevel      slog.Level
	ShutdownGrace time.Duration
	// ShutdownDrain is how long the HTTP listeners keep serving after
	// SIGTERM, /readyz answering 503, before they close (SHUTDOWN_DRAIN,
	// part of ShutdownGrace; 0 by default).
	ShutdownDrain time.Duration
	// PprofAddr serves net/http/pprof when set (PPROF_ADDR): for profiling
	// a live replica. Bind it to a private address; it is off by default.
	PprofAddr string
	// AdminAddr, when set (ADMIN_ADDR), serves /metrics and the detailed
	// /readyz on their own listener, and HTTP_ADDR keeps only the API,
	// /healthz and a /readyz without detail: the public port can then be
	// exposed alone.
	AdminAddr string
	// GoMemLimitSet: the operator set GOMEMLIMIT (the runtime read it);
	// otherwise Run gives the runtime a soft limit from the container's
	// memory limit (package memlimit).
	GoMemLimitSet bool
}

// ReadBase reads the settings every service shares; defaultAddr is the
// service's HTTP_ADDR default (docs/design/contract.md):
//
//	DATABASE_URL    the Postgres URL, as the service's own role in production (libpq TLS parameters
//	                such as sslmode=verify-full and sslrootcert are honoured); `migrate` uses the owner's
//	HTTP_ADDR       host:port or :port of the API, /healthz, /readyz and (without ADMIN_ADDR) /metrics
//	ADMIN_ADDR      when set, /metrics and the detailed /readyz move to this listener and HTTP_ADDR keeps
//	                only the API, /healthz and a /readyz without detail, so the public port is exposed alone
//	PPROF_ADDR      serves net/http/pprof for profiling a live replica; bind it to a private address
//	SHUTDOWN_GRACE  how long in-flight work may finish after SIGTERM before it is cancelled
//	SHUTDOWN_DRAIN  how long the HTTP listeners keep serving after SIGTERM, /readyz answering 503, before
//	                they close: for a load balancer that polls /readyz; part of SHUTDOWN_GRACE. On
//	                Kubernetes the preStop sleep does this (0: /readyz answers 503 and the listeners close)
//	LOG_LEVEL       debug, info, warn or error
//	GOMEMLIMIT      the Go runtime's soft memory limit; unset, the service takes it from its container's
//	                memory limit (pkg/memlimit)
func ReadBase(env *config.Env, name, defaultAddr string) Base {
	b := Base{
		Name:          name,
		DatabaseURL:   env.String("DATABASE_URL", DefaultDatabaseURL),
		HTTPAddr:      env.String("HTTP_ADDR", defaultAddr),
		ShutdownGrace: env.Duration("SHUTDOWN_GRACE", 20*time.Second),
		ShutdownDrain: env.Duration("SHUTDOWN_DRAIN", 0),
		PprofAddr:     env.String("PPROF_ADDR", ""),
		AdminAddr:     env.String("ADMIN_ADDR", ""),
		GoMemLimitSet: env.String("GOMEMLIMIT", "") != "",
	}
	if _, _, err := net.SplitHostPort(b.HTTPAddr); err != nil {
		env.Errorf("HTTP_ADDR must be host:port or :port, got %q", b.HTTPAddr)
	}
	if _, _, err := net.SplitHostPort(b.AdminAddr); b.AdminAddr != "" && err != nil {
		env.Errorf("ADMIN_ADDR must be host:port or :port, got %q", b.AdminAddr)
	}
	lvl, err := logging.ParseLevel(env.String("LOG_LEVEL", "info"))
	if err != nil {
		env.Errorf("LOG_LEVEL: %v", err)
	}
	b.LogLevel = lvl
	if b.ShutdownGrace <= 0 {
		env.Errorf("SHUTDOWN_GRACE must be positive")
	}
	if b.ShutdownDrain < 0 || (b.ShutdownGrace > 0 && b.ShutdownDrain >= b.ShutdownGrace) {
		env.Errorf("SHUTDOWN_DRAIN must be at least 0 and shorter than SHUTDOWN_GRACE (%s), got %s", b.ShutdownGrace, b.ShutdownDrain)
	}
	return b
}

// ServePprof serves the runtime profiles on PprofAddr until ctx is done; it
// returns at once when PPROF_ADDR is not set.
func (b Base) ServePprof(ctx context.Context, logger *slog.Logger) error {
	if b.PprofAddr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: b.PprofAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	logger.Warn("pprof enabled", "addr", b.PprofAddr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("pprof server: %w", err)
	}
	return nil
}

// Routers returns the router a service mounts its routes on and, when
// ADMIN_ADDR is set, the handler of the operational endpoints to run with
// ServeAdmin (nil otherwise: they are on the router).
func (b Base) Routers(logger *slog.Logger, reg *prometheus.Registry, checks ...httpserver.Check) (chi.Router, http.Handler) {
	if b.AdminAddr == "" {
		return httpserver.NewRouter(logger, reg, checks...), nil
	}
	return httpserver.NewPublicRouter(logger, reg, checks...), httpserver.NewAdminRouter(reg, checks...)
}

// ServeAdmin serves admin (from Routers) on ADMIN_ADDR until ctx is done;
// it returns at once when admin is nil.
func (b Base) ServeAdmin(ctx context.Context, admin http.Handler, logger *slog.Logger) error {
	if admin == nil {
		return nil
	}
	return httpserver.RunDraining(ctx, b.AdminAddr, admin, logger.With("listener", "admin"), b.ShutdownDrain, b.ShutdownGrace)
}

// Listeners are the service's HTTP listeners as components, for the first
// stage of Run (they stop taking new work first): HTTP_ADDR serving router,
// and ADMIN_ADDR and PPROF_ADDR when set. When stopped, /readyz answers 503
// at once; HTTP_ADDR and ADMIN_ADDR keep serving for SHUTDOWN_DRAIN, then
// each drains its in-flight requests within what is left of SHUTDOWN_GRACE.
func (b Base) Listeners(router, admin http.Handler, logger *slog.Logger) []lifecycle.Component {
	return []lifecycle.Component{
		lifecycle.Func("http", func(ctx context.Context) error {
			return httpserver.RunDraining(ctx, b.HTTPAddr, router, logger, b.ShutdownDrain, b.ShutdownGrace)
		}),
		lifecycle.Func("admin", func(ctx context.Context) error { return b.ServeAdmin(ctx, admin, logger) }),
		lifecycle.Func("pprof", func(ctx context.Context) error { return b.ServePprof(ctx, logger) }),
	}
}

// Run runs the service's components until ctx is done (SIGINT, SIGTERM) or
// one of them fails, then stops the stages in order within SHUTDOWN_GRACE:
// see lifecycle.Run. The first stage is Listeners; the run.go closes its
// pools and clients after Run returns.
func (b Base) Run(ctx context.Context, logger *slog.Logger, stages ...lifecycle.Stage) error {
	restore := b.limitMemory(logger, os.DirFS("/"))
	defer restore() // for a run inside a test
	err := lifecycle.Run(ctx, logger, b.ShutdownGrace, stages...)
	if err != nil {
		logger.Error(b.Name+" stopped", "error", err.Error())
		return err
	}
	logger.Info(b.Name + " stopped")
	return nil
}

// limitMemory gives the Go runtime a soft memory limit of memlimit.Ratio
// of the container's memory limit found under root, unless GOMEMLIMIT is
// set: the heap is then collected harder as it nears the limit instead of
// the container being killed for it. A limit that cannot be read is
// logged and the service runs without one, as it did before.
func (b Base) limitMemory(logger *slog.Logger, root fs.FS) (restore func()) {
	applied, restore, err := memlimit.Apply(b.GoMemLimitSet, root)
	switch {
	case err != nil:
		logger.Warn("GOMEMLIMIT not set: the container's memory limit could not be read (set GOMEMLIMIT)", "error", err.Error())
	case applied.Limit > 0:
		logger.Info("GOMEMLIMIT chosen from the container's memory limit (set GOMEMLIMIT to choose)",
			"gomemlimit_bytes", applied.Limit, "container_limit_bytes", applied.Container)
	}
	return restore
}

// Logger returns the service's JSON logger on w.
func (b Base) Logger(w io.Writer) *slog.Logger {
	return logging.New(w, b.Name, b.LogLevel)
}

// tracingFlush bounds how long a stopping service waits for its last spans
// to reach the collector.
const tracingFlush = 5 * time.Second

// StartTracing sets up OpenTelemetry tracing from the OTEL_* variables
// (telemetry.Setup: off unless an OTLP endpoint or exporter is configured)
// and returns the function to defer that flushes the spans still buffered,
// for at most 5s. Call it before building clients, so their
// instrumentation finds the provider.
func (b Base) StartTracing(ctx context.Context, getenv func(string) string, logger *slog.Logger) (stop func(), err error) {
	tel, err := telemetry.Setup(ctx, b.Name, getenv)
	if err != nil {
		return nil, err
	}
	if !tel.Enabled() {
		return func() {}, nil
	}
	logger.Info("tracing enabled", "exporter", tel.Exporter)
	return func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingFlush)
		defer cancel()
		if err := tel.Shutdown(flushCtx); err != nil {
			logger.Warn("traces not flushed", "error", err.Error())
		}
	}, nil
}

// RunFunc runs a service until ctx is done.
type RunFunc func(ctx context.Context, getenv func(string) string, stdout io.Writer) error

// Main runs run with a context cancelled on SIGINT or SIGTERM and exits 1 if
// it fails. `<binary> migrate` applies the embedded migrations to
// DATABASE_URL and exits instead; `<binary> healthcheck` asks the running
// service whether it is ready; `<binary> --version` (or `version`) prints
// the build (pkg/buildinfo) and exits.
func Main(name string, run RunFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := dispatch(ctx, name, os.Args[1:], run, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		stop()
		os.Exit(1)
	}
}

// dispatch runs what args (the command line after the binary) ask for.
func dispatch(ctx context.Context, name string, args []string, run RunFunc, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return run(ctx, getenv, stdout)
	}
	switch args[0] {
	case "migrate":
		contract := false
		for _, a := range args[1:] {
			switch a {
			case "--contract", "-contract":
				contract = true
			default:
				return fmt.Errorf("migrate: unknown argument %q (want none or --contract)", a)
			}
		}
		return Migrate(getenv, stdout, name, contract) //nolint:contextcheck // a migration runs to its end: not cancelled half-way by a signal
	case "healthcheck":
		return Healthcheck(ctx, getenv)
	case "version", "--version", "-version":
		_, err := fmt.Fprintln(stdout, buildinfo.Get().String(name))
		return err
	default:
		return fmt.Errorf("unknown command %q (want no argument, migrate, healthcheck or --version)", args[0])
	}
}

// Healthcheck asks the service on HTTP_ADDR whether it is ready (GET
// /readyz) and fails if not. Container images have no curl; compose
// healthchecks run `<binary> healthcheck` instead.
func Healthcheck(ctx context.Context, getenv func(string) string) error {
	addr := getenv("HTTP_ADDR")
	if addr == "" {
		return errors.New("healthcheck: HTTP_ADDR is not set")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("healthcheck: HTTP_ADDR %q: %w", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: /readyz answered %d", resp.StatusCode)
	}
	return nil
}

// Migrate applies the embedded migrations to DATABASE_URL, holding back a
// contract migration (migrations.ContractMigrations) that no other release
// has stopped before yet: the release that first reaches it records itself
// and stops before it; the next release's `migrate` applies it, its rollout
// starting only once the holding release is all that runs. contract
// (`migrate --contract`) applies it now, for an operator who knows no pod
// of the previous release is left, and for dev builds (every one is
// release "dev", so none differs from the one that held it).
func Migrate(getenv func(string) string, stdout io.Writer, name string, contract bool) error {
	env := config.New(getenv)
	base := ReadBase(env, name, ":0")
	if err := env.Err(); err != nil {
		return err
	}
	logger := base.Logger(stdout)
	release := buildinfo.Get().Version
	r, err := migrations.UpGated(base.DatabaseURL, migrations.Gate{Release: release, Contract: contract})
	if err != nil {
		return err
	}
	for _, v := range r.Applied {
		logger.Info("contract migration applied", "migration", v, "release", release, "forced", contract)
	}
	if h := r.Held; h != nil {
		logger.Warn("contract migration held back until the next release",
			"migration", h.Version, "why", h.Why, "held_by", h.By, "held_since", h.At.UTC().Format(time.RFC3339),
			"release", release,
			"applied_by", "the migrate of any release other than "+h.By+" (its rollout starts once "+h.By+" is all that runs), or `migrate --contract` once no pod of the release before "+h.By+" is left")
	}
	logger.Info("schema migrated", "version", r.Version, "fresh_database", r.Fresh)
	return nil
}
