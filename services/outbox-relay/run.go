package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/breaker"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/service"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/relay"
)

// Config is outbox-relay's settings.
type Config struct {
	service.Base
	KafkaBrokers []string
	// KafkaSecurity is KAFKA_TLS*, KAFKA_SASL_*.
	KafkaSecurity kafkax.Security
	// Workers is how many claim/publish loops run in this process; they
	// share the outbox exactly as replicas do.
	Workers int
	Relay   relay.Config
	Breaker breaker.Config
}

func readConfig(getenv func(string) string) (Config, error) {
	env := config.New(getenv)
	host, _ := os.Hostname()
	c := Config{
		Base:          service.ReadBase(env, "outbox-relay", ":8081"),
		KafkaBrokers:  env.List("KAFKA_BROKERS"),
		KafkaSecurity: kafkax.ReadSecurity(env),
		Workers:       env.Int("RELAY_WORKERS", 2),
		Relay: relay.Config{
			Owner:          fmt.Sprintf("%s-%d-%s", host, os.Getpid(), logging.NewCorrelationID()[:6]),
			BatchSize:      env.Int("RELAY_BATCH_SIZE", 500),
			PollInterval:   env.Duration("RELAY_POLL_INTERVAL", 500*time.Millisecond),
			Lease:          env.Duration("RELAY_LEASE", time.Minute),
			PublishTimeout: env.Duration("RELAY_PUBLISH_TIMEOUT", 15*time.Second),
			Retention:      env.Duration("RELAY_RETENTION", 24*time.Hour),
			Backoff: backoff.Policy{
				Base:        env.Duration("RELAY_BACKOFF_BASE", time.Second),
				Multiplier:  env.Float("RELAY_BACKOFF_MULTIPLIER", 2),
				Max:         env.Duration("RELAY_BACKOFF_MAX", 30*time.Second),
				MaxAttempts: 6, // per row: transaction_outbox.max_retries
			},
		},
		Breaker: breaker.Config{
			Name:                "kafka",
			ConsecutiveFailures: uint32(env.Int("BREAKER_FAILURES", 5)),
			OpenFor:             env.Duration("BREAKER_OPEN_FOR", 30*time.Second),
			HalfOpenProbes:      1,
		},
	}
	if len(c.KafkaBrokers) == 0 {
		c.KafkaBrokers = []string{"127.0.0.1:9092"}
	}
	if c.Workers < 1 {
		env.Errorf("RELAY_WORKERS must be at least 1")
	}
	if err := c.Relay.Validate(); err != nil {
		env.Errorf("%v", err)
	}
	if err := c.Breaker.Validate(); err != nil {
		env.Errorf("BREAKER_*: %v", err)
	}
	return c, env.Err()
}

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := readConfig(getenv)
	if err != nil {
		return err
	}
	logger := cfg.Logger(stdout).With("relay", cfg.Relay.Owner)

	pool, err := database.Connect(ctx, cfg.DatabaseURL, database.Options{MaxConns: 8, ApplicationName: cfg.Name})
	if err != nil {
		return err
	}
	defer pool.Close()

	kafka, err := kafkax.NewClient(cfg.KafkaBrokers, logger, append(cfg.KafkaSecurity.Opts(),
		// The relay hands Kafka a whole batch and waits for every ack:
		// lingering for more records only adds latency to each batch.
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(cfg.Relay.PublishTimeout),
		kgo.ProduceRequestTimeout(cfg.Relay.PublishTimeout),
		kgo.ProducerBatchMaxBytes(4<<20),
		kgo.MaxBufferedRecords(4*cfg.Workers*cfg.Relay.BatchSize+1000),
	)...)
	if err != nil {
		return err
	}
	defer kafka.Close()

	reg := httpserver.NewRegistry()
	br, err := breaker.New[struct{}](cfg.Breaker, logger, breaker.NewMetrics(reg))
	if err != nil {
		return err
	}
	r, err := relay.New(cfg.Relay, outbox.NewStore(pool), kafka, br, logger, relay.NewMetrics(reg), time.Now)
	if err != nil {
		return err
	}
	router, admin := cfg.Routers(logger, reg,
		httpserver.Check{Name: "postgres", Check: database.Ping(pool)},
		httpserver.Check{Name: "kafka", Check: kafkax.Ping(kafka)},
	)

	// Background helpers stop after the relay has settled its last batch.
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	var helpers sync.WaitGroup
	helpers.Add(3)
	go func() { defer helpers.Done(); relay.Listen(bg, cfg.DatabaseURL, logger, r.Wake) }()
	go func() { defer helpers.Done(); r.RunRetention(bg, time.Minute) }()
	go func() { defer helpers.Done(); r.RunStats(bg, 5*time.Second) }()

	logger.Info("outbox relay started", "batch_size", cfg.Relay.BatchSize, "brokers", cfg.KafkaBrokers, "kafka_security", cfg.KafkaSecurity.String())
	g, gctx := errgroup.WithContext(ctx)
	for range cfg.Workers {
		g.Go(func() error { return r.Run(gctx) })
	}
	g.Go(func() error { return httpserver.Run(gctx, cfg.HTTPAddr, router, logger, cfg.ShutdownGrace) })
	g.Go(func() error { return cfg.ServePprof(gctx, logger) })
	g.Go(func() error { return cfg.ServeAdmin(gctx, admin, logger) })
	err = g.Wait()
	stopBG()
	helpers.Wait()
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = kafka.Flush(flushCtx) // best effort: dead-letter notices to aegis.outbox.dlq
	logger.Info("outbox relay stopped")
	return err
}
