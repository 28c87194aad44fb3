package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/breaker"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/pkg/outbound"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/panics"
	"github.com/aegis-payments/aegis/pkg/service"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/deliver"
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
	// Outbound is OUTBOUND_*: delivery of aegis.settlements to the
	// endpoints (docs/design/outbound.md).
	Outbound deliver.Config
	// Alert is the alerter's (log line and counter; alert.ReadConfig
	// refuses the removed ALERT_WEBHOOK_* settings).
	Alert alert.Config
}

// readConfig reads outbox-relay's settings (with service.ReadBase's,
// kafkax.ReadSecurity's, kafkax.ReadMembership's, alert.ReadConfig's and
// outbound.ReadPolicy's):
//
//	KAFKA_BROKERS               the Kafka bootstrap brokers, host:port, comma-separated (unset: 127.0.0.1:9092)
//	RELAY_WORKERS               claim/publish loops in this process; they share the outbox as replicas do
//	RELAY_BATCH_SIZE            outbox rows claimed per cycle
//	RELAY_POLL_INTERVAL         how often an idle relay looks for rows (a NOTIFY wakes it sooner)
//	RELAY_LEASE                 how long a claimed batch is the relay's before another may take it over
//	RELAY_PUBLISH_TIMEOUT       how long a batch may wait for Kafka's acknowledgements
//	RELAY_RETENTION             removed: a published row is deleted when it is settled, none is kept; set, the
//	                            relay refuses to start
//	RELAY_BACKOFF_BASE          the first retry delay of a row Kafka refused (exponential, full jitter)
//	RELAY_BACKOFF_MULTIPLIER    the growth of each next delay
//	RELAY_BACKOFF_MAX           the longest delay; after 6 attempts the row is a dead letter
//	BREAKER_FAILURES            consecutive transient failures that open a breaker (the relay's on Kafka, the
//	                            worker's on each PSP)
//	BREAKER_OPEN_FOR            how long an open breaker refuses calls before one probe goes through
//	OUTBOUND_GROUP              the consumer group that takes `aegis.settlements` in for outbound delivery
//	OUTBOUND_SENDERS            outbound delivery attempts this process runs at once
//	OUTBOUND_PER_ENDPOINT       outbound delivery attempts to one endpoint this process runs at once
//	OUTBOUND_POLL_INTERVAL      how often an idle dispatcher looks for due deliveries (a new event wakes it sooner)
//	OUTBOUND_TIMEOUT            one delivery attempt's time limit, answer included
//	OUTBOUND_LEASE              how long a claimed delivery is its relay's before another may attempt it (a relay that
//	                            dies mid-attempt); must exceed `OUTBOUND_TIMEOUT`; `0`: 2 × `OUTBOUND_TIMEOUT` + 15s
//	OUTBOUND_RETRY_SCHEDULE     the delays after the immediate first attempt, comma-separated (±10 % jitter each; a
//	                            later `Retry-After` wins); the delivery fails after the last
//	OUTBOUND_DISABLE_AFTER      an endpoint failing every attempt this long (from when it was last enabled if later)
//	                            is disabled, with one alert (`outbound-endpoint-disabled:<id>`)
//	OUTBOUND_HEALTH_INTERVAL    how often the failing endpoints are looked for
//	OUTBOUND_LOG_RETENTION      how long delivery attempts are kept; must exceed the retry schedule plus
//	                            `OUTBOUND_DISABLE_AFTER`
//	OUTBOUND_MESSAGE_RETENTION  how long messages (and their finished deliveries) are kept once none is pending;
//	                            must exceed the retry schedule plus `OUTBOUND_DISABLE_AFTER`
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
	c.Alert = alert.ReadConfig(env, "outbox-relay")
	schedule, err := deliver.ParseSchedule(env.String("OUTBOUND_RETRY_SCHEDULE", deliver.DefaultSchedule))
	if err != nil {
		env.Errorf("OUTBOUND_RETRY_SCHEDULE: %v", err)
	}
	c.Outbound = deliver.Config{
		Group:            env.String("OUTBOUND_GROUP", deliver.DefaultGroup),
		Brokers:          c.KafkaBrokers,
		Membership:       kafkax.ReadMembership(env),
		Security:         c.KafkaSecurity,
		Senders:          env.Int("OUTBOUND_SENDERS", deliver.DefaultSenders),
		PerEndpoint:      env.Int("OUTBOUND_PER_ENDPOINT", deliver.DefaultPerEndpoint),
		PollInterval:     env.Duration("OUTBOUND_POLL_INTERVAL", deliver.DefaultPollInterval),
		Timeout:          env.Duration("OUTBOUND_TIMEOUT", deliver.DefaultTimeout),
		Lease:            env.Duration("OUTBOUND_LEASE", 0),
		Schedule:         schedule,
		DisableAfter:     env.Duration("OUTBOUND_DISABLE_AFTER", deliver.DefaultDisableAfter),
		HealthInterval:   env.Duration("OUTBOUND_HEALTH_INTERVAL", deliver.DefaultHealthInterval),
		LogRetention:     env.Duration("OUTBOUND_LOG_RETENTION", deliver.DefaultLogRetention),
		MessageRetention: env.Duration("OUTBOUND_MESSAGE_RETENTION", deliver.DefaultMessageRetention),
		Policy:           outbound.ReadPolicy(env),
	}
	if c.Outbound.Lease == 0 && c.Outbound.Timeout > 0 {
		c.Outbound.Lease = 2*c.Outbound.Timeout + 15*time.Second
	}
	if err == nil {
		env.Check(c.Outbound.Validate(), map[string]string{
			"Brokers":          "KAFKA_BROKERS",
			"Senders":          "OUTBOUND_SENDERS",
			"PerEndpoint":      "OUTBOUND_PER_ENDPOINT",
			"PollInterval":     "OUTBOUND_POLL_INTERVAL",
			"Timeout":          "OUTBOUND_TIMEOUT",
			"Lease":            "OUTBOUND_LEASE",
			"Schedule":         "OUTBOUND_RETRY_SCHEDULE",
			"DisableAfter":     "OUTBOUND_DISABLE_AFTER",
			"HealthInterval":   "OUTBOUND_HEALTH_INTERVAL",
			"LogRetention":     "OUTBOUND_LOG_RETENTION",
			"MessageRetention": "OUTBOUND_MESSAGE_RETENTION",
		})
	}
	if c.Workers < 1 {
		env.Errorf("RELAY_WORKERS must be at least 1")
	}
	// Refused, not ignored: a deployment that sets it expects published rows
	// to stay readable for that long, and none are kept.
	if _, set := env.Lookup("RELAY_RETENTION"); set {
		env.Errorf("RELAY_RETENTION was removed: the relay deletes each outbox row once Kafka has acknowledged it and keeps " +
			"none (rows that failed for good stay, settled dlq, beside their dead letter; see docs/data.md): unset it")
	}
	env.Check(c.Relay.Validate(), map[string]string{
		"BatchSize":          "RELAY_BATCH_SIZE",
		"PollInterval":       "RELAY_POLL_INTERVAL",
		"Lease":              "RELAY_LEASE",
		"PublishTimeout":     "RELAY_PUBLISH_TIMEOUT",
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

	// The outbox store's settings fit outbound delivery too: no statement
	// timeout; its statements, like the store's, are small and index-driven
	// (a claim of due deliveries, look-ups by id, batched deletes), so they
	// lose nothing to the planner settings; and its intake turns
	// synchronous_commit back on for its own transactions. Outbound attempts
	// hold a connection only to claim and to record, never across a POST.
	reg := httpserver.NewRegistry()
	pool, err := database.Connect(ctx, cfg.DatabaseURL, database.Options{MaxConns: 16, ApplicationName: cfg.Name,
		Settings: outbox.StoreSettings(), Registerer: reg})
	if err != nil {
		return err
	}
	defer pool.Close()

	kafka, err := kafkax.NewClient(cfg.KafkaBrokers, logger, append(append(cfg.KafkaSecurity.Opts(), relay.ClientOpts()...),
		kgo.RecordDeliveryTimeout(cfg.Relay.PublishTimeout),
		kgo.ProduceRequestTimeout(cfg.Relay.PublishTimeout),
		kgo.ProducerBatchMaxBytes(4<<20),
		kgo.MaxBufferedRecords(4*cfg.Workers*cfg.Relay.BatchSize+1000),
		kafkax.Metrics(reg, "relay", logger),
	)...)
	if err != nil {
		return err
	}
	defer kafka.Close()

	deps := lifecycle.Deps{Logger: logger, Clock: time.Now, Registerer: reg, Panics: panics.NewCounter(reg)}
	br, err := breaker.New[struct{}](cfg.Breaker, logger, breaker.NewMetrics(reg))
	if err != nil {
		return err
	}
	r, err := relay.New(cfg.Relay, relay.Deps{Deps: deps, Store: outbox.NewStore(pool), Kafka: kafka, Breaker: br})
	if err != nil {
		return err
	}
	alerter, err := alert.New(cfg.Alert, deps)
	if err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	out, err := deliver.New(cfg.Outbound, deliver.Deps{Deps: deps, Pool: pool, Alerts: alerter})
	if err != nil {
		return err
	}
	defer out.Close() // after Run, before pool.Close: the intake has committed and left its group
	router, admin := cfg.Routers(logger, reg,
		httpserver.Check{Name: "postgres", Check: database.Ping(pool)},
		httpserver.Check{Name: "kafka", Check: kafkax.Ping(kafka)},
	)

	// Each relay loop finishes and settles its batch in flight when stopped.
	intake := cfg.Listeners(router, admin, logger)
	for range cfg.Workers {
		intake = append(intake, lifecycle.Func("outbox-relay/relay", r.Run))
	}
	// Outbound: the intake commits what it stored; attempts in flight are
	// abandoned and due again after their lease.
	intake = append(intake,
		lifecycle.Func("outbox-relay/outbound-intake", out.RunIntake),
		lifecycle.Supervised("outbox-relay/outbound-dispatch", deps, out.RunDispatch),
	)
	// Background helpers stop after the relay has settled its last batch; a
	// panic in one restarts it, not the process.
	helpers := []lifecycle.Component{
		lifecycle.Supervised("outbox-relay/listen", deps, func(ctx context.Context) error {
			relay.Listen(ctx, cfg.DatabaseURL, logger, r.Wake)
			return nil
		}),
		lifecycle.Supervised("outbox-relay/purge", deps, func(ctx context.Context) error {
			r.RunPurge(ctx, time.Minute)
			return nil
		}),
		lifecycle.Supervised("outbox-relay/stats", deps, func(ctx context.Context) error {
			r.RunStats(ctx, 5*time.Second)
			return nil
		}),
		lifecycle.Supervised("outbox-relay/outbound-health", deps, func(ctx context.Context) error {
			out.RunHealth(ctx)
			return nil
		}),
		lifecycle.Supervised("outbox-relay/outbound-retention", deps, func(ctx context.Context) error {
			out.RunRetention(ctx, time.Minute)
			return nil
		}),
		lifecycle.Supervised("outbox-relay/outbound-stats", deps, func(ctx context.Context) error {
			out.RunStats(ctx, 15*time.Second)
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
