package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/bearer"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/service"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/api"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/consume"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/monitor"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/recon"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/ui"
)

// Defaults from CONTRACT.md ("Environment") and the service's own tuning.
const (
	defaultHTTPAddr          = ":8083"
	defaultKafkaBrokers      = "127.0.0.1:9092"
	defaultConsumerGroup     = "dlq-admin"
	defaultReconcileInterval = 24 * time.Hour
	// firstReconcile is how soon after start the first scheduled check
	// runs (sooner if RECONCILE_INTERVAL is shorter).
	firstReconcile = 30 * time.Second
)

// Config is dlq-admin's settings.
type Config struct {
	service.Base
	KafkaBrokers []string
	// Tokens is DLQ_ADMIN_TOKENS.
	Tokens        *bearer.Set
	ConsumerGroup string
	Membership    kafkax.Membership
	// KafkaSecurity is KAFKA_TLS*, KAFKA_SASL_*.
	KafkaSecurity kafkax.Security
	// Alert is ALERT_WEBHOOK_URL, ALERT_WEBHOOK_FORMAT,
	// ALERT_PAGERDUTY_ROUTING_KEY and ALERT_DEDUPE_WINDOW.
	Alert alert.Config
	// Monitor is DLQ_CHECK_INTERVAL and DLQ_DEPTH_ALERT_THRESHOLD.
	Monitor monitor.Config
	// ReplayRate is REPLAY_RATE: bulk replay letters per second.
	ReplayRate float64
	// ReconcileInterval is RECONCILE_INTERVAL.
	ReconcileInterval time.Duration
	// ReconcileStatementTimeout is RECONCILE_STATEMENT_TIMEOUT.
	ReconcileStatementTimeout time.Duration
}

func readConfig(getenv func(string) string) (Config, error) {
	env := config.New(getenv)
	c := Config{
		Base:          service.ReadBase(env, "dlq-admin", defaultHTTPAddr),
		KafkaBrokers:  env.List("KAFKA_BROKERS"),
		ConsumerGroup: env.String("DLQ_CONSUMER_GROUP", defaultConsumerGroup),
		Membership:    kafkax.ReadMembership(env),
		KafkaSecurity: kafkax.ReadSecurity(env),
		Alert:         alert.ReadConfig(env, "dlq-admin"),
		Monitor: monitor.Config{
			CheckInterval:  env.Duration("DLQ_CHECK_INTERVAL", monitor.DefaultCheckInterval),
			DepthThreshold: int64(env.Int("DLQ_DEPTH_ALERT_THRESHOLD", monitor.DefaultDepthThreshold)),
		},
		ReplayRate:                env.Float("REPLAY_RATE", replay.DefaultRate),
		ReconcileInterval:         env.Duration("RECONCILE_INTERVAL", defaultReconcileInterval),
		ReconcileStatementTimeout: env.Duration("RECONCILE_STATEMENT_TIMEOUT", recon.DefaultStatementTimeout),
	}
	if c.Monitor.CheckInterval <= 0 {
		env.Errorf("DLQ_CHECK_INTERVAL must be positive")
	}
	if c.Monitor.DepthThreshold < 1 {
		env.Errorf("DLQ_DEPTH_ALERT_THRESHOLD must be at least 1")
	}
	// Below one letter per 10s a job would mostly wait; above 10000/s the
	// throttle no longer protects anything.
	if c.ReplayRate < 0.1 || c.ReplayRate > 10000 {
		env.Errorf("REPLAY_RATE must be between 0.1 and 10000 letters per second, got %v", c.ReplayRate)
	}
	if c.ReconcileStatementTimeout < time.Second {
		env.Errorf("RECONCILE_STATEMENT_TIMEOUT must be at least 1s")
	}
	if c.ReconcileInterval < time.Second {
		env.Errorf("RECONCILE_INTERVAL must be at least 1s")
	}
	if _, set := env.Lookup("KAFKA_BROKERS"); !set {
		c.KafkaBrokers = []string{defaultKafkaBrokers}
	}
	if len(c.KafkaBrokers) == 0 {
		env.Errorf("KAFKA_BROKERS must list at least one host:port")
	}
	for _, b := range c.KafkaBrokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			env.Errorf("KAFKA_BROKERS must be comma-separated host:port, got %q", b)
		}
	}
	tokens, err := bearer.Parse(env.String("DLQ_ADMIN_TOKENS", ""), api.Roles())
	if err != nil {
		env.Errorf("DLQ_ADMIN_TOKENS: %v", err)
	}
	c.Tokens = tokens
	return c, env.Err()
}

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := readConfig(getenv)
	if err != nil {
		return err
	}
	logger := cfg.Logger(stdout)
	tokens := cfg.Tokens
	if tokens.Len() == 0 {
		logger.Warn("DLQ_ADMIN_TOKENS is not set: every /v1 request is refused with 401")
	}

	pool, err := database.Connect(ctx, cfg.DatabaseURL, database.Options{MaxConns: 8, ApplicationName: cfg.Name})
	if err != nil {
		return err
	}
	defer pool.Close()

	reg := httpserver.NewRegistry()
	alerter, err := alert.New(cfg.Alert, logger, reg, time.Now)
	if err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	st := store.New(pool)
	mon, err := monitor.New(cfg.Monitor, st, alerter, logger, reg, time.Now)
	if err != nil {
		return err
	}
	consumer, err := consume.New(consume.Config{Brokers: cfg.KafkaBrokers, Group: cfg.ConsumerGroup,
		Membership: cfg.Membership, Security: cfg.KafkaSecurity, OnStored: mon.Notify}, pool, logger, reg)
	if err != nil {
		return err
	}
	// Runs before pool.Close: the consumer has committed and left the group
	// by the time Postgres goes.
	defer consumer.Close()
	notifier := outbox.NewNotifier(pool, outbox.NotifyInterval, logger)
	replays := replay.New(pool, st, logger, time.Now).WithNotifier(notifier)
	runner, err := replay.NewRunner(replays, replay.RunnerConfig{Owner: runnerName(), Rate: cfg.ReplayRate})
	if err != nil {
		return err
	}
	reconciler, err := recon.New(pool, alerter, logger, reg, time.Now)
	if err != nil {
		return err
	}
	reconciler.WithStatementTimeout(cfg.ReconcileStatementTimeout)

	router, admin := cfg.Routers(logger, reg,
		httpserver.Check{Name: "postgres", Check: database.Ping(pool)},
		httpserver.Check{Name: "kafka", Check: consumer.Ping},
	)
	api.Mount(router, api.Deps{Logger: logger, Store: st, Replay: replays, Recon: reconciler, Tokens: tokens, Now: time.Now})
	if err := ui.Mount(router); err != nil {
		return err
	}

	logger.Info("dlq-admin started", "brokers", cfg.KafkaBrokers, "kafka_security", cfg.KafkaSecurity.String(), "group", cfg.ConsumerGroup, "tokens", tokens.Len(),
		"replay_rate", cfg.ReplayRate, "reconcile_interval", cfg.ReconcileInterval.String(), "alert_webhook", cfg.Alert.WebhookURL != "")
	// Any part failing stops the others; on SIGTERM all stop: the HTTP
	// server drains in-flight requests, the consumer commits what it stored,
	// the replay runner lets go of its job for the next runner to resume.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return consumer.Run(gctx) })
	g.Go(func() error { return httpserver.Run(gctx, cfg.HTTPAddr, router, logger, cfg.ShutdownGrace) })
	g.Go(func() error { return cfg.ServePprof(gctx, logger) })
	g.Go(func() error { return cfg.ServeAdmin(gctx, admin, logger) })
	g.Go(func() error { alerter.Run(gctx); return nil })
	g.Go(func() error { return mon.Run(gctx) })
	g.Go(func() error { return runner.Run(gctx) })
	g.Go(func() error { notifier.Run(gctx); return nil })
	g.Go(func() error {
		return reconciler.Schedule(gctx, min(firstReconcile, cfg.ReconcileInterval), cfg.ReconcileInterval)
	})
	err = g.Wait()
	logger.Info("dlq-admin stopped")
	return err
}

// runnerName names this process's replay runner in replay_jobs.locked_by:
// host, pid and a random suffix, unique even across restarts with one pid.
func runnerName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "dlq-admin"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}
