package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/pkg/panics"
)

// Handler applies one record. When it returns nil the record's effect is
// durable (committed in Postgres, delivered, stored) and its offset may be
// committed.
type Handler func(ctx context.Context, r *kgo.Record) error

// Order says which records are handled one after the other.
type Order int

const (
	// PerKey handles the records of one key one at a time, in the order
	// polled (the log's within a partition, none promised across
	// partitions), whatever their topic and partition, and different keys
	// concurrently; records without a key are ordered per partition.
	PerKey Order = iota
	// PerPartition handles a partition's records one at a time, in order,
	// and partitions concurrently.
	PerPartition
)

// DeadLetterer writes the dead letter of a record the loop gave up on, in
// one attempt; the loop retries a failed attempt within its retry bound. An
// error marked errclass.Permanent (the letter cannot be built) is not
// retried: the record is left undone.
type DeadLetterer interface {
	DeadLetter(ctx context.Context, r *kgo.Record, f dlq.Failure) error
}

// Config tunes a Consumer. Zero values take the defaults named.
type Config struct {
	// Name labels the handler's recovered panics (aegis_panics_total
	// component) and the loop's logs, for example "payout-worker/handler".
	Name string
	// Group is the consumer group; dead letters name it.
	Group string
	// MaxPollRecords bounds one poll (default 500); at most twice as many
	// records are in flight, and they must finish within the group's
	// rebalance timeout.
	MaxPollRecords int
	// Concurrency is how many keys (PerKey) or partitions (PerPartition)
	// are handled at once (default 1).
	Concurrency int
	// Order is PerKey (the default) or PerPartition.
	Order Order
	// Backoff spaces the in-place retries of a record and of its dead
	// letter (default 200ms doubling to 10s, full jitter); its MaxAttempts
	// is ignored: RetryAttempts and RetryFor bound the retries.
	Backoff backoff.Policy
	// RetryAttempts and RetryFor bound the in-place attempts of one record
	// after transient failures, and of its dead letter: whichever comes
	// first ends them (defaults 20 and 1m).
	RetryAttempts int
	RetryFor      time.Duration
	// DeadLetterFor, when set, bounds the retries of a dead letter's write
	// by time alone, in place of RetryAttempts and RetryFor: for a handler
	// whose attempts are few and costly (a POST to a receiver), so that a
	// short outage of the dead-letter store neither pages nor sends the
	// record's effect again.
	DeadLetterFor time.Duration
	// StuckAfter is after how many in-place attempts a record is logged as
	// blocking its key (default 10). It is logged, not paged: dlq-admin's
	// stall detector owns the partition-stalled page.
	StuckAfter int
	// Grace is how long the records in flight may run after Run's context
	// ended (0: they are cancelled at once and redelivered).
	Grace time.Duration
	// Window is how long the loop keeps polling while records are in
	// flight before it lets a pending rebalance through (default 2s).
	Window time.Duration
	// LeaveQueued: when the window ends (Window passed, or shutdown), only
	// the records already started finish; records queued behind them are
	// not started, and their partitions are rewound to be polled again.
	// Each key (PerPartition: partition) that found a free slot starts its
	// first record, so even a window shorter than one record moves on.
	// Without it every record polled in the window is handled first, which
	// keeps a rebalance short only while each record is quick; a consumer
	// whose records may each take long (a receiver that is down) sets it.
	LeaveQueued bool
	// CommitTimeout bounds one offset commit, at shutdown too (default 10s).
	CommitTimeout time.Duration
	// Classify reads a handler's error (default Classify).
	Classify func(ctx context.Context, err error) errclass.Class
	// OnQueued, when set (tests), is called with each polled record that waits behind one of its key (PerPartition: partition) in flight.
	OnQueued func(r *kgo.Record)
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = c.Group + "/handler"
	}
	if c.MaxPollRecords < 1 {
		c.MaxPollRecords = 500
	}
	if c.Concurrency < 1 {
		c.Concurrency = 1
	}
	if c.Backoff.Base <= 0 {
		c.Backoff = backoff.Policy{Base: 200 * time.Millisecond, Multiplier: 2, Max: 10 * time.Second, MaxAttempts: 1}
	}
	if c.RetryAttempts < 1 {
		c.RetryAttempts = 20
	}
	if c.RetryFor <= 0 {
		c.RetryFor = time.Minute
	}
	if c.StuckAfter < 1 {
		c.StuckAfter = 10
	}
	if c.Window <= 0 {
		c.Window = 2 * time.Second
	}
	if c.CommitTimeout <= 0 {
		c.CommitTimeout = 10 * time.Second
	}
	if c.Classify == nil {
		c.Classify = Classify
	}
	return c
}

// Deps is what a Consumer works with besides its client, handler and
// Config: the logger, registry (the loop's metrics, shared by every loop
// of a process) and panic counter every component gets, the alerter (nil:
// none; a dead letter that cannot be written) and the dead-letter path
// (nil: a record given up on is left undone and redelivered, for a
// consumer with nowhere safer to put it).
type Deps struct {
	lifecycle.Deps
	Alerts      *alert.Alerter
	DeadLetters DeadLetterer
}

// Consumer runs a handler over a consumer group.
type Consumer struct {
	cl      *kgo.Client
	h       Handler
	cfg     Config
	logger  *slog.Logger
	metrics *metrics
	alerts  *alert.Alerter
	letters DeadLetterer
	panics  *panics.Counter
	spans   kafkax.ProcessSpans
}

// New returns a consumer on cl, a client created with ClientOpts (group,
// topics, manual commits, rebalances blocked on poll).
func New(cl *kgo.Client, h Handler, cfg Config, deps Deps) (*Consumer, error) {
	common := deps.WithDefaults()
	cfg = cfg.withDefaults()
	m, err := newMetrics(common.Registerer)
	if err != nil {
		return nil, err
	}
	return &Consumer{cl: cl, h: h, cfg: cfg, logger: common.Logger, metrics: m, alerts: deps.Alerts,
		letters: deps.DeadLetters, panics: common.Panics, spans: kafkax.NewProcessSpans(cfg.Group)}, nil
}

// ClientOpts are the franz-go options the loop relies on, with the group
// membership settings of m: offsets committed by the loop only, rebalances
// blocked while records are in flight, a new group reading from the start.
func ClientOpts(group string, m kafkax.Membership, topics ...string) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.RebalanceTimeout(2 * time.Minute),
	}, m.Opts()...)
}

// Run consumes until ctx is done, then finishes the records in flight
// (within Grace), commits what was handled and returns. It returns nil,
// also when the client is closed under it.
func (c *Consumer) Run(ctx context.Context) error {
	for {
		fetches := c.cl.PollRecords(ctx, c.cfg.MaxPollRecords)
		if fetches.IsClientClosed() {
			return nil
		}
		c.logFetchErrors(fetches)
		if fetches.NumRecords() > 0 {
			c.runWindow(ctx, fetches)
		}
		c.cl.AllowRebalance()
		if ctx.Err() != nil {
			return nil
		}
	}
}

func (c *Consumer) logFetchErrors(fetches kgo.Fetches) {
	fetches.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			c.logger.Warn("kafka fetch error", "topic", topic, "partition", p, "error", err.Error())
		}
	})
}

// rewind moves the fetch position of each partition back to its first
// undone record, so that the next poll delivers it again. Without it a
// record left undone while the loop keeps running would be skipped until
// the next rebalance. Called between polls with rebalances blocked, as
// SetOffsets requires.
func (c *Consumer) rewind(undone []*kgo.Record) {
	if len(undone) == 0 {
		return
	}
	set := map[string]map[int32]kgo.EpochOffset{}
	for _, r := range undone {
		if set[r.Topic] == nil {
			set[r.Topic] = map[int32]kgo.EpochOffset{}
		}
		set[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset}
		c.logger.Warn("record left undone; its partition is rewound to redeliver it", "group", c.cfg.Group, "topic", r.Topic,
			"partition", r.Partition, "offset", r.Offset)
	}
	c.cl.SetOffsets(set)
}

// handle runs the handler for one record until it is done, dead-lettered or
// the loop stops; it reports whether the record may be committed.
// Transient failures are retried in place, bounded by RetryAttempts and
// RetryFor; anything else ends in a dead letter at once.
func (c *Consumer) handle(ctx context.Context, r *kgo.Record) bool {
	// The handling, its Postgres, Redis and PSP calls, the events and dead
	// letters it writes all join the trace the record's producer started.
	ctx, span := c.spans.Start(ctx, r)
	defer span.End()
	ctx = logging.WithCorrelationID(ctx, kafkax.Header(r, kafkax.HeaderCorrelationID))
	first := time.Now()
	var history []dlq.Attempt
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := c.panics.Call(ctx, c.logger, c.cfg.Name, func() error { return c.h(ctx, r) })
		class := c.cfg.Classify(ctx, err)
		if err != nil {
			span.RecordError(err, trace.WithAttributes(attribute.String("aegis.error_class", string(class))))
		}
		c.metrics.handled.WithLabelValues(r.Topic, outcome(class)).Inc()
		c.metrics.duration.WithLabelValues(r.Topic).Observe(time.Since(start).Seconds())
		switch class {
		case "":
			return true
		case errclass.Canceled:
			return false
		case errclass.Poison, errclass.Permanent:
			history = append(history, dlq.Attempt{At: time.Now(), Error: err.Error(), Class: string(class)})
			return c.deadLetter(ctx, r, err, class, history)
		}
		if ctx.Err() != nil {
			return false
		}
		history = append(history, dlq.Attempt{At: time.Now(), Error: err.Error(), Class: string(class)})
		if attempt >= c.cfg.RetryAttempts || time.Since(first) >= c.cfg.RetryFor {
			c.metrics.exhausted.WithLabelValues(r.Topic).Inc()
			cause := fmt.Errorf("still failing after %d in-place attempts over %s: %w",
				attempt, time.Since(first).Round(time.Millisecond), err)
			c.logger.ErrorContext(ctx, "in-place retries exhausted; the record goes to its dead-letter path", "group", c.cfg.Group,
				"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "attempts", attempt, "error", err.Error())
			return c.deadLetter(ctx, r, cause, errclass.Transient, history)
		}
		wait := c.cfg.Backoff.Delay(attempt)
		c.logger.WarnContext(ctx, "handling failed; retrying the record in place", "group", c.cfg.Group, "topic", r.Topic,
			"partition", r.Partition, "offset", r.Offset, "attempt", attempt, "retry_in", wait.String(), "error", err.Error())
		if attempt == c.cfg.StuckAfter {
			c.logger.ErrorContext(ctx, "partition blocked: a record keeps failing in place", "group", c.cfg.Group,
				"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "attempts", attempt, "error", err.Error())
		}
		if !backoff.Sleep(ctx, wait) {
			return false
		}
	}
}

// deadLetter writes the record's dead letter with the error, its class and
// the attempts made; until it is written the record is not committed. The
// write is retried within the same bound as the handler; past it the record
// is left undone (its partition is rewound and it comes back on a later
// poll) and an alert says so. Without a dead-letter path the record is left
// undone after one backoff ceiling, so that a record that always fails does
// not spin.
func (c *Consumer) deadLetter(ctx context.Context, r *kgo.Record, cause error, class errclass.Class, history []dlq.Attempt) bool {
	f := dlq.Failure{Err: cause, Class: class, RetryCount: len(history), History: history}
	if c.letters == nil {
		c.logger.ErrorContext(ctx, "record given up on and no dead-letter path; it is left undone and redelivered",
			"group", c.cfg.Group, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
			"error_class", string(class), "error", cause.Error())
		backoff.Sleep(ctx, c.cfg.Backoff.Max)
		return false
	}
	first := time.Now()
	for attempt := 1; ; attempt++ {
		err := c.letters.DeadLetter(ctx, r, f)
		if err == nil {
			c.metrics.dlqFailing.WithLabelValues(r.Topic).Set(0)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		// A letter that cannot be built fails the same way every time:
		// leave the record undone at once, paused and paged, as one whose
		// write keeps failing.
		class, explicit := errclass.Explicit(err)
		cannotBuild := explicit && class == errclass.Permanent
		if cannotBuild || c.deadLetterBounded(attempt, first) {
			if cannotBuild {
				c.logger.ErrorContext(ctx, "cannot build dead letter", "group", c.cfg.Group, "topic", r.Topic,
					"partition", r.Partition, "offset", r.Offset, "error", err.Error())
				backoff.Sleep(ctx, c.cfg.Backoff.Max)
			}
			c.metrics.dlqFailing.WithLabelValues(r.Topic).Set(1)
			if c.alerts != nil {
				c.alerts.Raise(ctx, alert.Alert{Key: alert.DeadLetterPublishFailedKey(r.Topic), Severity: alert.Critical,
					Summary: c.cfg.Group + " cannot write a dead letter; the record will be redelivered",
					Details: map[string]any{"topic": r.Topic, "partition": r.Partition, "offset": r.Offset, "error": err.Error()}})
			}
			return false
		}
		wait := c.cfg.Backoff.Delay(attempt)
		c.logger.WarnContext(ctx, "dead-letter write failed; retrying", "group", c.cfg.Group, "error", err.Error(),
			"retry_in", wait.String())
		if !backoff.Sleep(ctx, wait) {
			return false
		}
	}
}

// deadLetterBounded reports whether a dead letter's write, tried attempt
// times since first, has had its retries (Config.DeadLetterFor, or the
// record's own bound).
func (c *Consumer) deadLetterBounded(attempt int, first time.Time) bool {
	if c.cfg.DeadLetterFor > 0 {
		return time.Since(first) >= c.cfg.DeadLetterFor
	}
	return attempt >= c.cfg.RetryAttempts || time.Since(first) >= c.cfg.RetryFor
}

func outcome(class errclass.Class) string {
	if class == "" {
		return "ok"
	}
	return string(class)
}

// graceContext is a context that ends grace after parent does.
func graceContext(parent context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	stop := context.AfterFunc(parent, func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-ctx.Done():
		}
	})
	return ctx, func() { stop(); cancel() }
}
