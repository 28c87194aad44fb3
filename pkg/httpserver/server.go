package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aegis-payments/aegis/pkg/buildinfo"
)

// Check is one readiness dependency: Postgres answers, Kafka answers, ...
type Check struct {
	Name  string
	Check func(ctx context.Context) error
}

// NewRegistry returns a fresh Prometheus registry with the Go runtime and
// process collectors and aegis_build_info{version,commit,go} 1 (the
// running build, pkg/buildinfo). Each service owns one; nothing uses the
// global default.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// A fresh registry has no aegis_build_info yet: this cannot collide.
	_ = buildinfo.Register(reg, buildinfo.Get())
	return reg
}

// NewRouter returns a chi router with recovery, correlation ids, access logs
// and the operational endpoints mounted: /healthz, /readyz with each
// dependency's state, /metrics. Services add their routes to it.
func NewRouter(logger *slog.Logger, reg *prometheus.Registry, checks ...Check) chi.Router {
	r := newRouter(logger, reg)
	mountOps(r, reg, checks, true)
	return r
}

// NewPublicRouter is NewRouter for a service whose operational endpoints
// are served apart (NewAdminRouter on ADMIN_ADDR): /healthz, and /readyz
// answering its status code and "ready" or "not_ready" without saying which
// dependency failed or why (host names, error text); no /metrics. The
// public port can then be exposed alone.
func NewPublicRouter(logger *slog.Logger, reg *prometheus.Registry, checks ...Check) chi.Router {
	r := newRouter(logger, reg)
	r.Get("/healthz", healthy)
	r.Get("/readyz", readyHandler(checks, false))
	return r
}

// NewAdminRouter serves the operational endpoints alone: /healthz, /readyz
// with each dependency's state, /metrics.
func NewAdminRouter(reg *prometheus.Registry, checks ...Check) chi.Router {
	r := chi.NewRouter()
	r.Use(Correlation)
	r.NotFound(notFound)
	mountOps(r, reg, checks, true)
	return r
}

func newRouter(logger *slog.Logger, reg *prometheus.Registry) chi.Router {
	r := chi.NewRouter()
	r.Use(Trace, Recover(logger), Correlation, AccessLog(logger, NewMetrics(reg)))
	r.NotFound(notFound)
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this route")
	})
	return r
}

func mountOps(r chi.Router, reg *prometheus.Registry, checks []Check, detail bool) {
	r.Get("/healthz", healthy)
	r.Get("/readyz", readyHandler(checks, detail))
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
}

func notFound(w http.ResponseWriter, _ *http.Request) {
	WriteError(w, http.StatusNotFound, "not_found", "no such route")
}

func healthy(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyHandler runs the checks; detail adds each one's state to the answer.
func readyHandler(checks []Check, detail bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		status := http.StatusOK
		results := make(map[string]string, len(checks))
		for _, c := range checks {
			if err := c.Check(ctx); err != nil {
				status = http.StatusServiceUnavailable
				results[c.Name] = err.Error()
				continue
			}
			results[c.Name] = "ok"
		}
		state := "ready"
		if status != http.StatusOK {
			state = "not_ready"
		}
		if !detail {
			WriteJSON(w, status, map[string]any{"status": state})
			return
		}
		WriteJSON(w, status, map[string]any{"status": state, "checks": results})
	}
}

// Run serves h on addr until ctx is done, then shuts down gracefully: it stops
// accepting connections and waits up to grace for in-flight requests. The
// listener is bound before Run returns control to the accept loop, so a bad
// address fails fast.
func Run(ctx context.Context, addr string, h http.Handler, logger *slog.Logger, grace time.Duration) error {
	return RunDraining(ctx, addr, h, logger, 0, grace)
}

// RunDraining is Run with a drain: once ctx is done, /readyz answers 503
// and the listener keeps serving for drain before it closes, so that a
// load balancer polling /readyz stops sending requests first. The drain is
// part of grace: in-flight requests then have what is left of it.
func RunDraining(ctx context.Context, addr string, h http.Handler, logger *slog.Logger, drain, grace time.Duration) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ServeDraining(ctx, ln, h, logger, drain, grace)
}

// Serve is Run on an existing listener (tests bind port 0 themselves).
func Serve(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger, grace time.Duration) error {
	return ServeDraining(ctx, ln, h, logger, 0, grace)
}

// ServeDraining is RunDraining on an existing listener. From the moment
// ctx is done, GET /readyz answers 503 {"status":"not_ready"} whatever the
// checks say: the service is stopping.
func ServeDraining(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger, drain, grace time.Duration) error {
	var stopping atomic.Bool
	srv := &http.Server{
		Handler:           notReadyWhen(&stopping, h),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("http server listening", "addr", ln.Addr().String())

	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	stopping.Store(true)
	drain = min(max(drain, 0), grace)
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if drain > 0 {
		logger.Info("http server draining: /readyz answers 503", "drain", drain.String())
		timer := time.NewTimer(drain)
		select {
		case <-timer.C:
		case err := <-errc:
			timer.Stop()
			return fmt.Errorf("http server: %w", err)
		}
	}
	logger.Info("http server shutting down", "grace", (grace - drain).String())
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("http server shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	return nil
}

// notReadyWhen answers GET /readyz with 503 once stopping is set, and
// passes every other request to h.
func notReadyWhen(stopping *atomic.Bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stopping.Load() && r.URL.Path == "/readyz" {
			WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready"})
			return
		}
		h.ServeHTTP(w, r)
	})
}
