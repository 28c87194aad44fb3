package main

import (
	"context"
	"io"
	"time"

	"github.com/aegis-payments/aegis/pkg/bearer"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/service"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/api"
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
	APITokens            *bearer.Set
	DBMaxConns           int
}

func readConfig(getenv func(string) string) (Config, error) {
	env := config.New(getenv)
	c := Config{
		Base:                 service.ReadBase(env, "webhook-api", ":8080"),
		StripeWebhookSecrets: env.List("STRIPE_WEBHOOK_SECRET"),
		PaystackSecretKey:    env.String("PAYSTACK_SECRET_KEY", ""),
		DBMaxConns:           env.Int("DB_MAX_CONNS", 16),
	}
	if c.DBMaxConns < 1 {
		env.Errorf("DB_MAX_CONNS must be at least 1")
	}
	tokens, err := bearer.Parse(env.String("API_TOKENS", ""), nil)
	if err != nil {
		env.Errorf("API_TOKENS: %v", err)
	}
	c.APITokens = tokens
	return c, env.Err()
}

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := readConfig(getenv)
	if err != nil {
		return err
	}
	logger := cfg.Logger(stdout)
	tokens := cfg.APITokens
	if len(cfg.StripeWebhookSecrets) == 0 {
		logger.Warn("STRIPE_WEBHOOK_SECRET is not set: Stripe webhooks are refused with 503")
	}
	if cfg.PaystackSecretKey == "" {
		logger.Warn("PAYSTACK_SECRET_KEY is not set: Paystack webhooks and payouts are disabled")
	}
	if tokens.Len() == 0 {
		logger.Warn("API_TOKENS is not set: every /v1 request is refused")
	}

	pool, err := database.Connect(ctx, cfg.DatabaseURL, database.Options{MaxConns: int32(cfg.DBMaxConns), ApplicationName: cfg.Name})
	if err != nil {
		return err
	}
	defer pool.Close()

	reg := httpserver.NewRegistry()
	router := httpserver.NewRouter(logger, reg, httpserver.Check{Name: "postgres", Check: database.Ping(pool)})
	api.Mount(router, api.Deps{
		Logger:   logger,
		Ingest:   ingest.NewStore(pool, time.Now),
		Payouts:  payouts.NewStore(pool),
		Wallets:  wallets.NewStore(pool),
		Stripe:   verify.NewStripe(cfg.StripeWebhookSecrets),
		Paystack: verify.NewPaystack(cfg.PaystackSecretKey),
		Tokens:   tokens,
		ProviderEnabled: func(p string) bool {
			return p == ingest.Stripe || (p == ingest.Paystack && cfg.PaystackSecretKey != "")
		},
		Now: time.Now,
	})
	return httpserver.Run(ctx, cfg.HTTPAddr, router, logger, cfg.ShutdownGrace)
}
