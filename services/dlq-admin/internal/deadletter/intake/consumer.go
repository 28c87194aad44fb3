package intake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/consumer"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
)

// Topics are the dead-letter topics consumed: <topic>.dlq of each topic
// consumers read, and the relay's aegis.outbox.dlq.
func Topics() []string {
	return []string{
		kafkax.DLQTopic(kafkax.TopicWebhookPending),
		kafkax.DLQTopic(kafkax.TopicTransactions),
		kafkax.DLQTopic(kafkax.TopicSettlements),
		kafkax.TopicOutboxDLQ,
	}
}

// Config tunes the consumer. Zero durations and sizes take the defaults.
type Config struct {
	Brokers []string
	// Group is the consumer group (DLQ_CONSUMER_GROUP).
	Group string
	// Membership is how this replica takes part in the group
	// (KAFKA_SESSION_TIMEOUT, KAFKA_GROUP_INSTANCE_ID).
	Membership kafkax.Membership
	// Security is TLS and SASL to the brokers (KAFKA_TLS*, KAFKA_SASL_*).
	Security kafkax.Security
	// MaxPollRecords bounds one poll (default 500).
	MaxPollRecords int
	// Backoff spaces the retries of a letter Postgres could not store.
	// MaxAttempts is ignored; RetryFor bounds the retries instead.
	Backoff backoff.Policy
	// RetryFor bounds the in-place retries of one letter while Postgres
	// cannot store it (DLQ_STORE_RETRY_FOR, default 1m). Past it the
	// record is released, not dropped: nothing is committed, its partition
	// is rewound to it, and the next poll brings it back for another round.
	RetryFor time.Duration
	// AttemptTimeout bounds one attempt to store a letter; attempts under
	// way at shutdown may finish within it.
	AttemptTimeout time.Duration
	// CommitTimeout bounds one offset commit, at shutdown too.
	CommitTimeout time.Duration
	// OnStored, if set, is called after a letter was newly stored
	// (package depth's Notify, which alerts on it). It must not block.
	OnStored func()
}

// DefaultBackoff starts at a few hundred milliseconds and caps at 5s.
func DefaultBackoff() backoff.Policy {
	return backoff.Policy{Base: 250 * time.Millisecond, Multiplier: 2, Max: 5 * time.Second, MaxAttempts: 1}
}

func (c Config) withDefaults() Config {
	if c.MaxPollRecords == 0 {
		c.MaxPollRecords = 500
	}
	if c.Backoff.Base == 0 {
		c.Backoff = DefaultBackoff()
	}
	if c.Backoff.MaxAttempts == 0 {
		c.Backoff.MaxAttempts = 1 // the policy's validation wants one; RetryFor bounds the retries
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = 10 * time.Second
	}
	if c.RetryFor == 0 {
		c.RetryFor = time.Minute
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = 10 * time.Second
	}
	return c
}

// Validate reports settings that cannot work (after defaults).
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, config.Invalid("Brokers", "must list at least one broker"))
	}
	if c.Group == "" {
		errs = append(errs, config.Invalid("Group", "must not be empty"))
	}
	if c.MaxPollRecords < 1 {
		errs = append(errs, config.Invalid("MaxPollRecords", "must be at least 1"))
	}
	if err := c.Backoff.Validate(); err != nil {
		errs = append(errs, config.Within("Backoff", err))
	}
	for field, d := range map[string]time.Duration{"AttemptTimeout": c.AttemptTimeout, "CommitTimeout": c.CommitTimeout, "RetryFor": c.RetryFor} {
		if d < 0 {
			errs = append(errs, config.Invalid(field, "must not be negative"))
		}
	}
	return errors.Join(errs...)
}

// concurrency is how many keys are stored at once: enough to keep a burst
// of letters moving while each takes one statement.
const concurrency = 8

// Consumer stores dead-letter records. Run it once; Close it after Run
// returned.
type Consumer struct {
	cfg    Config
	client *kgo.Client
	pool   *pgxpool.Pool
	logger *slog.Logger
	m      *metrics
	loop   *consumer.Consumer
}

// New builds the consumer and its Kafka client; the group is joined by the
// first poll in Run.
//
// deps.Panics counts panics recovered while storing a letter (nil counts
// none); the metrics are registered on deps.Registerer.
func New(cfg Config, pool *pgxpool.Pool, deps lifecycle.Deps) (*Consumer, error) {
	deps = deps.WithDefaults()
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("dead-letter consumer: %w", err)
	}
	m, err := newMetrics(deps.Registerer)
	if err != nil {
		return nil, err
	}
	logger := deps.Logger.With("component", "dlq-consumer", "group", cfg.Group)
	opts := append(consumer.ClientOpts(cfg.Group, cfg.Membership, Topics()...), cfg.Security.Opts()...)
	client, err := kafkax.NewClient(cfg.Brokers, logger, append(opts, kafkax.Metrics(deps.Registerer, "dlq-consumer", logger),
		kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) {
			logger.Warn("rebalance waits for dead letters to be stored")
		}))...)
	if err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, client: client, pool: pool, logger: logger, m: m}
	// No dead-letter path: there is nowhere safer for a dead letter than
	// this table, so a letter given up on is rewound and redelivered.
	c.loop, err = consumer.New(client, c.handle, consumer.Config{
		Name: "dlq-admin/consumer", Group: cfg.Group, MaxPollRecords: cfg.MaxPollRecords,
		Concurrency: concurrency, Order: consumer.PerKey, Backoff: cfg.Backoff,
		RetryAttempts: math.MaxInt, RetryFor: cfg.RetryFor, Grace: cfg.AttemptTimeout,
		// Only the letters already started finish when a window ends: a
		// Postgres outage must not hold a rebalance for every queued key
		// times DLQ_STORE_RETRY_FOR.
		LeaveQueued:   true,
		CommitTimeout: cfg.CommitTimeout,
	}, consumer.Deps{Deps: deps})
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("dead-letter consumer: %w", err)
	}
	return c, nil
}

// Ping is the readiness check: Kafka answers.
func (c *Consumer) Ping(ctx context.Context) error { return kafkax.Ping(c.client)(ctx) }

// Close leaves the group and closes the Kafka client. Offsets are not
// committed here: Run commits every letter it stored before it returns.
func (c *Consumer) Close() { c.client.Close() }

// Run consumes until ctx is done, then returns nil once the letters in hand
// are stored and committed or given up (uncommitted, so redelivered).
func (c *Consumer) Run(ctx context.Context) error {
	c.logger.Info("dead-letter consumer started", "topics", Topics())
	err := c.loop.Run(ctx)
	c.logger.Info("dead-letter consumer stopped")
	return err
}

// handle stores one record's letter. Every failure is transient to the loop
// (retried within RetryFor, then the record is rewound): a letter Postgres
// refuses for its data is stored raw instead, so no failure is permanent.
func (c *Consumer) handle(ctx context.Context, r *kgo.Record) error {
	l, problems := dlq.FromRecord(r)
	actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	_, inserted, err := dlq.Insert(actx, c.pool, l)
	raw := false
	if database.RefusesData(err) {
		c.logger.ErrorContext(ctx, "Postgres refuses a dead letter as read; storing it raw", "topic", r.Topic,
			"partition", r.Partition, "offset", r.Offset, "error", err.Error())
		_, inserted, err = dlq.Insert(actx, c.pool, rawLetter(r, l, err))
		raw = true
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("store dead letter %s/%d/%d: %w", r.Topic, r.Partition, r.Offset, ctx.Err())
		}
		return errclass.AsTransient(fmt.Errorf("store dead letter %s/%d/%d: %w", r.Topic, r.Partition, r.Offset, err))
	}
	result := resultDuplicate
	if inserted {
		result = resultStored
	}
	c.m.ingested.WithLabelValues(r.Topic, result).Inc()
	if len(problems) > 0 {
		c.logger.WarnContext(ctx, "dead-letter record has malformed headers; stored it anyway",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "problems", problems)
		c.m.malformed.WithLabelValues(r.Topic).Inc()
	}
	if raw && inserted {
		c.m.storedRaw.WithLabelValues(r.Topic).Inc()
	}
	if inserted && c.cfg.OnStored != nil {
		c.cfg.OnStored()
	}
	return nil
}

// rawLetter is what is stored of a record whose letter Postgres refused:
// the record's value as it came (bytea takes any bytes), where it was read
// from (which keeps redelivery idempotent), short cleaned text fields and
// no headers, with class poison and an error that says what happened. An
// operator sees it like any other dead letter; its origin may be unusable,
// so replay may answer not_replayable.
func rawLetter(r *kgo.Record, l dlq.Letter, refused error) dlq.Letter {
	p, o := r.Partition, r.Offset
	source := l.Source
	if !slices.Contains(dlq.Sources(), source) {
		source = dlq.SourceConsumer
	}
	at := r.Timestamp
	if at.IsZero() {
		at = time.Now()
	}
	return dlq.Letter{
		Source: source, OriginalTopic: truncate(l.OriginalTopic, 249), ConsumerGroup: truncate(l.ConsumerGroup, 255),
		PartitionKey: truncate(l.PartitionKey, 255), EventType: truncate(l.EventType, 255), Payload: r.Value,
		Error: truncate(fmt.Sprintf("stored raw: Postgres refused the dead letter as read (%v); its error was: %s",
			refused, l.Error), 4000),
		ErrorClass: "poison", FirstFailureAt: at, FailedAt: at, CorrelationID: truncate(l.CorrelationID, 255),
		DLQTopic: r.Topic, DLQPartition: &p, DLQOffset: &o,
	}
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
