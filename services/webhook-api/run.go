package main

import (
	"context"
	"io"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/panics"
	"github.com/aegis-payments/aegis/pkg/service"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/api"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/clients"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/destinations"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/payouts"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/verify"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/wallets"
)

// Config is webhook-api's settings (CONTRACT.md "Environment").
type Config struct {
	service.Base
	StripeWebhookSecrets []string
	PaystackSecretKey    string
	// Clients are API_TOKENS: names, tokens and scopes.
	Clients    *clients.Set
	Limits     payouts.Limits
	DBMaxConns int
	// CommitWorkers transactions commit webhooks concurrently, each holding
	// up to CommitGroup of them (group commit).
	CommitWorkers int
	CommitGroup   int
}

func readConfig(getenv func(string) string) (Config, error) {
	env := config.New(getenv)
	c := Config{
		Base:                 service.ReadBase(env, "webhook-api", ":8080"),
		StripeWebhookSecrets: env.List("STRIPE_WEBHOOK_SECRET"),
		PaystackSecretKey:    env.String("PAYSTACK_SECRET_KEY", ""),
		DBMaxConns:           env.Int("DB_MAX_CONNS", 16),
		CommitWorkers:        env.Int("INGEST_COMMIT_WORKERS", 1),
		CommitGroup:          env.Int("INGEST_COMMIT_GROUP", 64),
	}
	if c.DBMaxConns < 1 {
		env.Errorf("DB_MAX_CONNS must be at least 1")
	}
	if c.CommitWorkers < 1 || c.CommitWorkers >= c.DBMaxConns {
		env.Errorf("INGEST_COMMIT_WORKERS must be at least 1 and below DB_MAX_CONNS")
	}
	if c.CommitGroup < 1 {
		env.Errorf("INGEST_COMMIT_GROUP must be at least 1")
	}
	set, err := clients.Parse(env.String("API_TOKENS", ""))
	if err != nil {
		env.Errorf("API_TOKENS: %v", err)
	}
	c.Clients = set
	if c.Limits.PerPayout, err = payouts.ParseLimit(env.String("PAYOUT_MAX_AMOUNT", "")); err != nil {
		env.Errorf("PAYOUT_MAX_AMOUNT: %v", err)
	}
	if c.Limits.Daily, err = payouts.ParseLimit(env.String("PAYOUT_DAILY_MAX", "")); err != nil {
		env.Errorf("PAYOUT_DAILY_MAX: %v", err)
	}
	return c, env.Err()
}

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := readConfig(getenv)
	if err != nil {
		return err
	}
	logger := cfg.Logger(stdout)
	if len(cfg.StripeWebhookSecrets) == 0 {
		logger.Warn("STRIPE_WEBHOOK_SECRET is not set: Stripe webhooks are refused with 503")
	}
	if cfg.PaystackSecretKey == "" {
		logger.Warn("PAYSTACK_SECRET_KEY is not set: Paystack webhooks and payouts are disabled")
	}
	if cfg.Clients.Len() == 0 {
		logger.Warn("API_TOKENS is not set: every /v1 request is refused")
	}
	for _, c := range cfg.Clients.Clients() {
		if c.Scope.Implicit() {
			logger.Warn("API client acts for every user: it is the only client and API_TOKENS states no scope for it",
				"client", c.Name)
			continue
		}
		logger.Info("API client", "client", c.Name, "scope", c.Scope.String())
	}
	if len(cfg.Limits.PerPayout)+len(cfg.Limits.Daily) > 0 {
		logger.Info("payout limits", "per_payout", cfg.Limits.PerPayout, "daily", cfg.Limits.Daily)
	}

	pool, err := database.Connect(ctx, cfg.DatabaseURL, database.Options{MaxConns: int32(cfg.DBMaxConns), ApplicationName: cfg.Name})
	if err != nil {
		return err
	}
	defer pool.Close()

	reg := httpserver.NewRegistry()
	router, admin := cfg.Routers(logger, reg, httpserver.Check{Name: "postgres", Check: database.Ping(pool)})
	// Shutdown order, by the defers below: the HTTP server drains, then the
	// committer commits what is queued, then the notifier stops, then the pool.
	notifier := outbox.NewNotifier(pool, outbox.NotifyInterval, logger)
	notifyCtx, stopNotify := context.WithCancel(context.WithoutCancel(ctx))
	defer stopNotify()
	go notifier.Run(notifyCtx)
	committer, err := ingest.NewCommitter(ingest.NewStore(pool, notifier, time.Now), cfg.CommitWorkers, cfg.CommitGroup)
	if err != nil {
		return err
	}
	committer.WithPanics(panics.NewCounter(reg), logger).Start()
	defer committer.Stop()
	api.Mount(router, api.Deps{
		Logger:       logger,
		Ingest:       committer,
		Payouts:      payouts.NewStore(pool, notifier, cfg.Limits),
		Destinations: destinations.NewStore(pool),
		Wallets:      wallets.NewStore(pool),
		Stripe:       verify.NewStripe(cfg.StripeWebhookSecrets),
		Paystack:     verify.NewPaystack(cfg.PaystackSecretKey),
		Clients:      cfg.Clients,
		Webhooks:     api.NewWebhookMetric(reg),
		Refused:      api.NewRefusalLog(logger, reg, time.Minute, time.Now),
		ProviderEnabled: func(p string) bool {
			return p == ingest.Stripe || (p == ingest.Paystack && cfg.PaystackSecretKey != "")
		},
		Now: time.Now,
	})
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return httpserver.Run(gctx, cfg.HTTPAddr, router, logger, cfg.ShutdownGrace) })
	g.Go(func() error { return cfg.ServePprof(gctx, logger) })
	g.Go(func() error { return cfg.ServeAdmin(gctx, admin, logger) })
	return g.Wait()
}
