package intake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/panics"
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
	// Backoff spaces the retries of a batch Postgres could not store.
	// MaxAttempts is ignored; RetryFor bounds the retries instead.
	Backoff backoff.Policy
	// RetryFor bounds the in-place retries of one polled batch while
	// Postgres cannot store it (DLQ_STORE_RETRY_FOR, default 1m). Past it
	// the batch is released, not dropped: nothing is committed, the
	// partitions are rewound to it and rebalances may run, and the next
	// poll brings the same records back for another round.
	RetryFor time.Duration
	// AttemptTimeout bounds one attempt to store a batch; an attempt under
	// way at shutdown may finish within it.
	AttemptTimeout time.Duration
	// CommitTimeout bounds one offset commit, at shutdown too.
	CommitTimeout time.Duration
	// OnStored, if set, is called after a batch stored at least one new
	// letter (package depth's Notify, which alerts on them). It must not
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

// Consumer stores dead-letter records. Run it once; Close it after Run
// returned.
type Consumer struct {
	cfg    Config
	client *kgo.Client
	pool   *pgxpool.Pool
	logger *slog.Logger
	m      *metrics
	panics *panics.Counter
	spans  kafkax.ProcessSpans
}

// New builds the consumer and its Kafka client; the group is joined by the
// first poll in Run.
//
// deps.Panics counts panics recovered while storing a batch (nil counts
// none); the metrics are registered on deps.Registerer.
func New(cfg Config, pool *pgxpool.Pool, deps lifecycle.Deps) (*Consumer, error) {
	deps = deps.WithDefaults()
	logger, reg := deps.Logger, deps.Registerer
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
	return &Consumer{cfg: cfg, client: client, pool: pool, logger: logger, m: m, panics: deps.Panics,
		spans: kafkax.NewProcessSpans(cfg.Group)}, nil
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
		records := fetches.Records()
		if len(records) > 0 {
			err = c.panics.Call(ctx, c.logger, "dlq-admin/consumer", func() error { return c.ingest(ctx, records) })
		}
		var perr *panics.Error
		if errors.As(err, &perr) {
			// A bug while storing: nothing of the batch was committed. Release
			// it (it is polled again) after a pause, as after an outage,
			// rather than lose it or let the panic end the process.
			backoff.Sleep(ctx, c.cfg.Backoff.Max)
			err = errGaveUp
		}
		if errors.Is(err, errGaveUp) {
			c.release(records)
			c.client.AllowRebalance()
			continue
		}
		c.client.AllowRebalance()
		if err != nil { // only when ctx is done
			c.logger.Info("dead-letter consumer stopped with a batch not stored; it will be redelivered")
			return nil
		}
	}
}

// errGaveUp: a batch could not be stored within RetryFor.
var errGaveUp = errors.New("dead letters not stored within the retry bound")

// release rewinds each partition of an unstored batch to its first record,
// so that the next poll delivers the batch again; called with rebalances
// still blocked, as SetOffsets requires.
func (c *Consumer) release(records []*kgo.Record) {
	first := map[string]map[int32]kgo.EpochOffset{}
	for _, r := range records {
		if first[r.Topic] == nil {
			first[r.Topic] = map[int32]kgo.EpochOffset{}
		}
		if o, ok := first[r.Topic][r.Partition]; !ok || r.Offset < o.Offset {
			first[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset}
		}
	}
	c.m.released.Inc()
	c.logger.Error("dead letters could not be stored within the retry bound; the batch is released and will be polled again",
		"records", len(records), "retry_for", c.cfg.RetryFor.String())
	c.client.SetOffsets(first)
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
			//nolint:contextcheck // the record's context carries its trace: the log line joins it
			c.logger.WarnContext(r.Context, "dead-letter record has malformed headers; storing it anyway",
				"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "problems", problems)
		}
	}

	// Each letter's handling is a span of the trace of the record that
	// failed (kotel carried it in the headers); a batch of one, the usual
	// case, is stored inside it, so its Postgres statements join that trace.
	sctx := ctx
	spans := make([]trace.Span, len(records))
	for i, r := range records {
		var pctx context.Context
		pctx, spans[i] = c.spans.Start(ctx, r)
		if len(records) == 1 {
			sctx = pctx
		}
	}
	defer func() {
		for _, s := range spans {
			s.End()
		}
	}()

	var inserted []bool
	began := time.Now()
	for retry := 1; ; retry++ {
		var err error
		inserted, err = c.store(sctx, records, letters)
		if database.RefusesData(err) {
			// One letter Postgres refuses for what it carries must not hold
			// the others (or its partition) for ever: store them one by one
			// and the refused one in its raw form.
			inserted, err = c.storeEach(sctx, records, letters, err)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("store dead letters: %w", ctx.Err())
		}
		c.m.storeFailures.Inc()
		if time.Since(began) >= c.cfg.RetryFor {
			return errGaveUp
		}
		delay := c.cfg.Backoff.Delay(retry)
		c.logger.Error("could not store dead letters; retrying the same records, offsets not committed",
			"records", len(records), "retry", retry, "delay", delay.String(),
			"transient", database.IsTransient(err), "error", err.Error())
		if !backoff.Sleep(ctx, delay) {
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

// storeEach stores letters one statement each (after cause refused the
// batch); a letter Postgres still refuses for its data is replaced by its
// raw form (rawLetter). It fails only if even that cannot be stored.
func (c *Consumer) storeEach(ctx context.Context, records []*kgo.Record, letters []dlq.Letter, cause error) ([]bool, error) {
	c.logger.Warn("Postgres refused a dead-letter batch for its data; storing its letters one by one",
		"records", len(records), "error", cause.Error())
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.AttemptTimeout)
	defer cancel()
	inserted := make([]bool, len(letters))
	for i, l := range letters {
		_, ok, err := dlq.Insert(actx, c.pool, l)
		if database.RefusesData(err) {
			r := records[i]
			//nolint:contextcheck // the record's context carries its trace: the log line joins it
			c.logger.ErrorContext(r.Context, "Postgres refuses a dead letter as read; storing it raw", "topic", r.Topic,
				"partition", r.Partition, "offset", r.Offset, "error", err.Error())
			_, ok, err = dlq.Insert(actx, c.pool, rawLetter(r, l, err))
			if err == nil && ok {
				c.m.storedRaw.WithLabelValues(r.Topic).Inc()
			}
		}
		if err != nil {
			r := records[i]
			return nil, fmt.Errorf("record %s/%d/%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		inserted[i] = ok
	}
	return inserted, nil
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

// commit commits the offsets of stored records, also when ctx is done: what
// is stored is committed before the consumer exits. A failed commit is
// logged, not retried; the records come again and are stored once.
func (c *Consumer) commit(ctx context.Context, records []*kgo.Record) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CommitTimeout)
	defer cancel()
	err := c.client.CommitRecords(cctx, records...)
	if err == nil {
		now := float64(time.Now().Unix())
		for _, r := range records {
			c.m.progress.WithLabelValues(r.Topic, strconv.Itoa(int(r.Partition))).Set(now)
		}
	}
	if err != nil {
		c.m.commitFailures.Inc()
		c.logger.Warn("could not commit offsets of stored dead letters; they will be redelivered and deduplicated",
			"records", len(records), "error", err.Error())
	}
}
