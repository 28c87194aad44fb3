package main

import (
	"context"
	"io"
	"net"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/aegis-payments/aegis/pkg/bearer"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/service"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/api"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/consume"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/store"
)

// Defaults from CONTRACT.md ("Environment").
const (
	defaultHTTPAddr      = ":8083"
	defaultKafkaBrokers  = "127.0.0.1:9092"
	defaultConsumerGroup = "dlq-admin"
)

// Config is dlq-admin's settings.
type Config struct {
	service.Base
	KafkaBrokers []string
	// Tokens is DLQ_ADMIN_TOKENS.
	Tokens        *bearer.Set
	ConsumerGroup string
}

func readConfig(getenv func(string) string) (Config, error) {
	env := config.New(getenv)
	c := Config{
		Base:          service.ReadBase(env, "dlq-admin", defaultHTTPAddr),
		KafkaBrokers:  env.List("KAFKA_BROKERS"),
		ConsumerGroup: env.String("DLQ_CONSUMER_GROUP", defaultConsumerGroup),
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
	consumer, err := consume.New(consume.Config{Brokers: cfg.KafkaBrokers, Group: cfg.ConsumerGroup}, pool, logger, reg)
	if err != nil {
		return err
	}
	// Runs before pool.Close: the consumer has committed and left the group
	// by the time Postgres goes.
	defer consumer.Close()

	router := httpserver.NewRouter(logger, reg,
		httpserver.Check{Name: "postgres", Check: database.Ping(pool)},
		httpserver.Check{Name: "kafka", Check: consumer.Ping},
	)
	api.Mount(router, api.Deps{Logger: logger, Store: store.New(pool), Tokens: tokens, Now: time.Now})

	logger.Info("dlq-admin started", "brokers", cfg.KafkaBrokers, "group", cfg.ConsumerGroup, "tokens", tokens.Len())
	// Either part failing stops the other; on SIGTERM both stop: the HTTP
	// server drains in-flight requests, the consumer commits what it stored.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return consumer.Run(gctx) })
	g.Go(func() error { return httpserver.Run(gctx, cfg.HTTPAddr, router, logger, cfg.ShutdownGrace) })
	err = g.Wait()
	logger.Info("dlq-admin stopped")
	return err
}
