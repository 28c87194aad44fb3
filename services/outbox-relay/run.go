package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/breaker"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/panics"
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

// readConfig reads outbox-relay's settings (with service.ReadBase's and
// kafkax.ReadSecurity's):
//
//	KAFKA_BROKERS             the Kafka bootstrap brokers, host:port, comma-separated (unset: 127.0.0.1:9092)
//	RELAY_WORKERS             claim/publish loops in this process; they share the outbox as replicas do
//	RELAY_BATCH_SIZE          outbox rows claimed per cycle
//	RELAY_POLL_INTERVAL       how often an idle relay looks for rows (a NOTIFY wakes it sooner)
//	RELAY_LEASE               how long a claimed batch is the relay's before another may take it over
//	RELAY_PUBLISH_TIMEOUT     how long a batch may wait for Kafka's acknowledgements
//	RELAY_RETENTION           how long published rows are kept before they are deleted
//	RELAY_BACKOFF_BASE        the first retry delay of a row Kafka refused (exponential, full jitter)
//	RELAY_BACKOFF_MULTIPLIER  the growth of each next delay
//	RELAY_BACKOFF_MAX         the longest delay; after 6 attempts the row is a dead letter
//	BREAKER_FAILURES          consecutive transient failures that open a breaker (the relay's on Kafka, the
//	                          worker's on each PSP)
//	BREAKER_OPEN_FOR          how long an open breaker refuses calls before one probe goes through
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
			BatchSize:      env.Int("RELAY_BATCH_SIZE", 2000),
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
			ConsecutiveFailures: env.Uint32("BREAKER_FAILURES", 5),
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
	env.Check(c.Relay.Validate(), map[string]string{
		"BatchSize":          "RELAY_BATCH_SIZE",
		"PollInterval":       "RELAY_POLL_INTERVAL",
		"Lease":              "RELAY_LEASE",
		"PublishTimeout":     "RELAY_PUBLISH_TIMEOUT",
		"Retention":          "RELAY_RETENTION",
		"Backoff.Base":       "RELAY_BACKOFF_BASE",
		"Backoff.Multiplier": "RELAY_BACKOFF_MULTIPLIER",
		"Backoff.Max":        "RELAY_BACKOFF_MAX",
	})
	env.Check(c.Breaker.Validate(), map[string]string{
		"ConsecutiveFailures": "BREAKER_FAILURES",
		"OpenFor":             "BREAKER_OPEN_FOR",
	})
	return c, env.Err()
}

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := readConfig(getenv)
	if err != nil {
		return err
	}
	logger := cfg.Logger(stdout).With("relay", cfg.Relay.Owner)
	stopTracing, err := cfg.StartTracing(ctx, getenv, logger)
	if err != nil {
		return err
	}
	defer stopTracing() // last: flushes the spans of the shutdown too

	pool, err := database.Connect(ctx, cfg.DatabaseURL, database.Options{MaxConns: 8, ApplicationName: cfg.Name,
		// Every statement on this pool is the outbox store's.
		Settings: outbox.StoreSettings()})
	if err != nil {
		return err
	}
	defer pool.Close()

	kafka, err := kafkax.NewClient(cfg.KafkaBrokers, logger, append(append(cfg.KafkaSecurity.Opts(), relay.ClientOpts()...),
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
	deps := lifecycle.Deps{Logger: logger, Clock: time.Now, Registerer: reg, Panics: panics.NewCounter(reg)}
	br, err := breaker.New[struct{}](cfg.Breaker, logger, breaker.NewMetrics(reg))
	if err != nil {
		return err
	}
	r, err := relay.New(cfg.Relay, relay.Deps{Deps: deps, Store: outbox.NewStore(pool), Kafka: kafka, Breaker: br})
	if err != nil {
		return err
	}
	router, admin := cfg.Routers(logger, reg,
		httpserver.Check{Name: "postgres", Check: database.Ping(pool)},
		httpserver.Check{Name: "kafka", Check: kafkax.Ping(kafka)},
	)

	// Each relay loop finishes and settles its batch in flight when stopped.
	intake := cfg.Listeners(router, admin, logger)
	for range cfg.Workers {
		intake = append(intake, lifecycle.Func("outbox-relay/relay", r.Run))
	}
	// Background helpers stop after the relay has settled its last batch; a
	// panic in one restarts it, not the process.
	helpers := []lifecycle.Component{
		lifecycle.Supervised("outbox-relay/listen", deps, func(ctx context.Context) error {
			relay.Listen(ctx, cfg.DatabaseURL, logger, r.Wake)
			return nil
		}),
		lifecycle.Supervised("outbox-relay/retention", deps, func(ctx context.Context) error {
			r.RunRetention(ctx, time.Minute)
			return nil
		}),
		lifecycle.Supervised("outbox-relay/stats", deps, func(ctx context.Context) error {
			r.RunStats(ctx, 5*time.Second)
			return nil
		}),
	}
	// Best effort: dead-letter notices to aegis.outbox.dlq.
	flush := lifecycle.OnStop("kafka flush", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = kafka.Flush(ctx)
		return nil
	})

	logger.Info("outbox relay started", "batch_size", cfg.Relay.BatchSize, "brokers", cfg.KafkaBrokers, "kafka_security", cfg.KafkaSecurity.String())
	return cfg.Run(ctx, logger,
		lifecycle.Stage{Name: "relay", Components: intake},
		lifecycle.Stage{Name: "helpers", Components: helpers},
		lifecycle.Stage{Name: "flush", Components: []lifecycle.Component{flush}},
	)
}
