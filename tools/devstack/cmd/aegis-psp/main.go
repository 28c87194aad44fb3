// Command aegis-psp runs the local Stripe/Paystack stand-in (see
// tools/devstack/internal/psp). It refuses to start with a live-looking PSP
// key in its environment. `aegis-psp healthcheck` asks a running one whether
// it answers; `aegis-psp --version` prints its build.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aegis-payments/aegis/pkg/buildinfo"
	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "healthcheck":
			if err := healthcheck(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			return
		case "version", "--version", "-version":
			fmt.Println(buildinfo.Get().String("aegis-psp"))
			return
		}
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With(slog.String("service", "psp-standin"))
	if err := run(logger); err != nil {
		logger.Error("psp stand-in failed", slog.String("error", err.Error()))
		os.Exit(1)
	}
}

func run(logger *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg, err := psp.ConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	srv, err := psp.New(cfg, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runDone := make(chan error, 1)
	go func() { runDone <- srv.Run(ctx) }()
	serveDone := make(chan error, 1)
	go func() { serveDone <- httpSrv.Serve(ln) }()
	logger.Info("psp stand-in listening", slog.String("addr", ln.Addr().String()),
		slog.Duration("settle_delay", cfg.SettleDelay), slog.Uint64("seed", cfg.Seed))

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-serveDone:
	}
	cancel() // stops Run, which also releases hanging fault requests
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelShutdown()
	if err := httpSrv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("http shutdown", slog.String("error", err.Error()))
	}
	if err := <-runDone; err != nil {
		return err
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	logger.Info("psp stand-in stopped")
	return nil
}

// healthcheck is for container healthchecks (the image has no curl).
func healthcheck() error {
	addr := os.Getenv("PSP_ADDR")
	if addr == "" {
		addr = "127.0.0.1:12111"
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get("http://127.0.0.1:" + port + "/healthz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz answered %d", resp.StatusCode)
	}
	return nil
}
