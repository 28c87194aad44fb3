package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkax"
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
	// MaxPollRecords bounds a batch: one transaction, one commit.
	MaxPollRecords int
	// Backoff spaces the retries of a batch Postgres refused. MaxAttempts is
	// ignored: a batch is retried until it is stored or the consumer stops.
	Backoff backoff.Policy
	// AttemptTimeout bounds one attempt to store a batch; an attempt under
	// way at shutdown may finish within it.
	AttemptTimeout time.Duration
	// CommitTimeout bounds one offset commit, at shutdown too.
	CommitTimeout time.Duration
	// OnStored, if set, is called after a batch stored at least one new
	// letter (package monitor's Notify, which alerts on them). It must not
	// block.
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
		c.Backoff.MaxAttempts = 1
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = 10 * time.Second
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
		errs = append(errs, errors.New("no Kafka brokers"))
	}
	if c.Group == "" {
		errs = append(errs, errors.New("consumer group must not be empty"))
	}
	if c.MaxPollRecords < 1 {
		errs = append(errs, errors.New("max poll records must be at least 1"))
	}
	if err := c.Backoff.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.AttemptTimeout < 0 || c.CommitTimeout < 0 {
		errs = append(errs, errors.New("timeouts must be positive"))
	}
	return errors.Join(errs...)
}

// Consumer stores dead-letter records. Run it once; Close it after Run
// returned.
type Consumer struct {
	cfg    Config
	client *kgo.Client
	pool   *pgxpool.Pool
	logger *slog.Logger
	m      *metrics
}

// New builds the consumer and its Kafka client; the group is joined by the
// first poll in Run.
func New(cfg Config, pool *pgxpool.Pool, logger *slog.Logger, reg prometheus.Registerer) (*Consumer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("dead-letter consumer: %w", err)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	logger = logger.With("component", "dlq-consumer", "group", cfg.Group)
	client, err := kafkax.NewClient(cfg.Brokers, logger, append([]kgo.Opt{
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(Topics()...),
		// Commits are ours, after the rows are stored (see doc.go).
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		// A new group starts from the oldest letter still in Kafka: a dead
		// letter published before dlq-admin first ran is still a failure.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) {
			logger.Warn("rebalance waits for a dead-letter batch to be stored")
		}),
	}, append(cfg.Membership.Opts(), cfg.Security.Opts()...)...)...)
	if err != nil {
		return nil, err
	}
	return &Consumer{cfg: cfg, client: client, pool: pool, logger: logger, m: m}, nil
}

// Ping is the readiness check: Kafka answers.
func (c *Consumer) Ping(ctx context.Context) error { return kafkax.Ping(c.client)(ctx) }

// Close leaves the group and closes the Kafka client. Offsets are not
// committed here: Run commits every batch it stored before it returns.
func (c *Consumer) Close() { c.client.Close() }

// Run consumes until ctx is done, then returns nil once the batch in hand is
// stored and committed or given up (uncommitted, so redelivered).
func (c *Consumer) Run(ctx context.Context) error {
	c.logger.Info("dead-letter consumer started", "topics", Topics())
	for {
		fetches := c.client.PollRecords(ctx, c.cfg.MaxPollRecords)
		if fetches.IsClientClosed() {
			c.client.AllowRebalance()
			return errors.New("dead-letter consumer: kafka client closed")
		}
		if ctx.Err() != nil {
			// Records polled but not handled are not committed: the
			// group's next member reads them again.
			c.client.AllowRebalance()
			c.logger.Info("dead-letter consumer stopped")
			return nil
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			c.logger.Warn("kafka fetch failed", "topic", topic, "partition", partition, "error", err.Error())
		})
		var err error
		if records := fetches.Records(); len(records) > 0 {
			err = c.ingest(ctx, records)
		}
		c.client.AllowRebalance()
		if err != nil { // only when ctx is done
			c.logger.Info("dead-letter consumer stopped with a batch not stored; it will be redelivered")
			return nil
		}
	}
}

// ingest stores records and then commits their offsets. It returns an error
// only when ctx ended before the batch could be stored.
func (c *Consumer) ingest(ctx context.Context, records []*kgo.Record) error {
	letters := make([]dlq.Letter, len(records))
	malformed := make([]bool, len(records))
	for i, r := range records {
		l, problems := dlq.FromRecord(r)
		letters[i], malformed[i] = l, len(problems) > 0
		if malformed[i] {
			c.logger.Warn("dead-letter record has malformed headers; storing it anyway",
				"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "problems", problems)
		}
	}

	var inserted []bool
	for retry := 1; ; retry++ {
		var err error
		inserted, err = c.store(ctx, records, letters)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("store dead letters: %w", ctx.Err())
		}
		c.m.storeFailures.Inc()
		delay := c.cfg.Backoff.Delay(retry)
		c.logger.Error("could not store dead letters; retrying the same records, offsets not committed",
			"records", len(records), "retry", retry, "delay", delay.String(),
			"transient", database.IsTransient(err), "error", err.Error())
		if !sleep(ctx, delay) {
			return fmt.Errorf("store dead letters: %w", ctx.Err())
		}
	}

	stored := 0
	for i, r := range records {
		result := resultDuplicate
		if inserted[i] {
			result, stored = resultStored, stored+1
		}
		c.m.ingested.WithLabelValues(r.Topic, result).Inc()
		if malformed[i] {
			c.m.malformed.WithLabelValues(r.Topic).Inc()
		}
	}
	c.logger.Debug("dead letters stored", "records", len(records), "stored", stored, "duplicates", len(records)-stored)
	if stored > 0 && c.cfg.OnStored != nil {
		c.cfg.OnStored()
	}
	c.commit(ctx, records)
	return nil
}

// store inserts letters in one transaction and reports which were new. The
// attempt is not cancelled by ctx (shutdown lets it finish) but is bounded by
// AttemptTimeout.
func (c *Consumer) store(ctx context.Context, records []*kgo.Record, letters []dlq.Letter) ([]bool, error) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.AttemptTimeout)
	defer cancel()
	inserted := make([]bool, len(letters))
	err := database.InTx(actx, c.pool, func(tx pgx.Tx) error {
		for i, l := range letters {
			_, ok, err := dlq.Insert(actx, tx, l)
			if err != nil {
				r := records[i]
				return fmt.Errorf("record %s/%d/%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			inserted[i] = ok
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return inserted, nil
}

// commit commits the offsets of stored records, also when ctx is done: what
// is stored is committed before the consumer exits. A failed commit is
// logged, not retried; the records come again and are stored once.
func (c *Consumer) commit(ctx context.Context, records []*kgo.Record) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CommitTimeout)
	defer cancel()
	if err := c.client.CommitRecords(cctx, records...); err != nil {
		c.m.commitFailures.Inc()
		c.logger.Warn("could not commit offsets of stored dead letters; they will be redelivered and deduplicated",
			"records", len(records), "error", err.Error())
	}
}

// sleep waits d or until ctx is done, and reports whether it waited.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
