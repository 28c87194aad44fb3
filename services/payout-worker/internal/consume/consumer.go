package consume

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox"
)

// Handler applies one message.
type Handler interface {
	Handle(ctx context.Context, m inbox.Message) error
}

// Config tunes the consumer.
type Config struct {
	Group string
	// MaxPollRecords bounds one poll; at most twice as many records are in
	// flight, and they must finish within the group's rebalance timeout.
	MaxPollRecords int
	// Concurrency is how many keys are handled at once.
	Concurrency int
	// InfraBackoff spaces in-place retries while Postgres or Redis is down.
	InfraBackoff backoff.Policy
	// Grace is how long in-flight records may run after shutdown begins.
	Grace time.Duration
	// StuckAfter is how many in-place retries of one record log that its
	// partition is blocked, by an outage or by a bug. The page comes from
	// dlq-admin's stall detector (the committed offset stops moving).
	StuckAfter int
	// RetryInPlaceAttempts and RetryInPlaceFor bound the in-place retries
	// of one record after transient failures (and the retries of its
	// dead-letter publish): whichever comes first ends them. A record whose
	// transient failure outlasts the bound is dead-lettered with class
	// transient and its history, so an outage or an unclassified bug delays
	// a batch by at most RetryInPlaceFor (plus one attempt) and never
	// blocks it for good. Zero means the defaults, 20 attempts and 1m.
	RetryInPlaceAttempts int
	RetryInPlaceFor      time.Duration
	// PermanentAsTransient plants a defect: every Postgres
	// refusal is retried in place as if transient. Only the chaos suite
	// sets it (WORKER_PLANT_POISON_RETRY), to prove it notices.
	PermanentAsTransient bool
}

// Consumer runs a handler over a consumer group.
type Consumer struct {
	cl      *kgo.Client
	h       Handler
	cfg     Config
	logger  *slog.Logger
	metrics *Metrics
	alerts  *alert.Alerter
	letters *dlq.Writer
	panics  *panics.Counter
	spans   kafkax.ProcessSpans
}

// Deps is what a Consumer works with besides its client, handler and
// Config: the logger, registry (its metrics are registered there) and panic
// counter (handler panics, aegis_panics_total; nil counts none) every
// component gets, the alerter (a partition stuck, a dead letter Kafka will
// not take) and the dead-letter writer (counts and logs the letters it
// publishes; nil counts none).
type Deps struct {
	lifecycle.Deps
	Alerts  *alert.Alerter
	Letters *dlq.Writer
}

// New returns a consumer on cl, a client created with ConsumerGroup,
// ConsumeTopics, DisableAutoCommit and BlockRebalanceOnPoll (see ClientOpts).
func New(cl *kgo.Client, h Handler, cfg Config, deps Deps) *Consumer {
	common := deps.WithDefaults()
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	if cfg.StuckAfter < 1 {
		cfg.StuckAfter = 10
	}
	if cfg.RetryInPlaceAttempts < 1 {
		cfg.RetryInPlaceAttempts = 20
	}
	if cfg.RetryInPlaceFor <= 0 {
		cfg.RetryInPlaceFor = time.Minute
	}
	return &Consumer{cl: cl, h: h, cfg: cfg, logger: common.Logger, metrics: NewMetrics(common.Registerer), alerts: deps.Alerts,
		letters: deps.Letters, panics: common.Panics, spans: kafkax.NewProcessSpans(cfg.Group)}
}

// ClientOpts are the franz-go options the consumer relies on, with the
// group membership settings of m.
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
// (within Grace), commits what was handled and returns.
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

// rewind moves the fetch position of each partition back to its first
// undone record, so that the next poll delivers it again. Without it a
// record left undone while the worker keeps running (its dead letter could
// not be published) would be skipped until the next rebalance. Called
// between polls with rebalances blocked, as SetOffsets requires.
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
		c.logger.Warn("record left undone; its partition is rewound to redeliver it", "topic", r.Topic,
			"partition", r.Partition, "offset", r.Offset)
	}
	c.cl.SetOffsets(set)
}

// handle runs the handler for one record until it is done, dead-lettered or
// the worker stops; it reports whether the record may be committed.
// Transient failures are retried in place, bounded by RetryInPlaceAttempts
// and RetryInPlaceFor; anything else ends in a dead letter at once.
func (c *Consumer) handle(ctx context.Context, r *kgo.Record) bool {
	m := inbox.New(r, c.cfg.Group)
	// The handling, its Postgres, Redis and PSP calls, the events and dead
	// letters it writes all join the trace the record's producer started.
	ctx, span := c.spans.Start(ctx, r)
	defer span.End()
	ctx = logging.WithCorrelationID(ctx, m.CorrelationID())
	first := time.Now()
	var history []dlq.Attempt
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := c.panics.Call(ctx, c.logger, "payout-worker/handler", func() error { return c.h.Handle(ctx, m) })
		class := classify(ctx, err, c.cfg.PermanentAsTransient)
		if err != nil {
			span.RecordError(err, trace.WithAttributes(attribute.String("aegis.error_class", string(class))))
		}
		c.metrics.handled.WithLabelValues(m.Topic, outcome(class)).Inc()
		c.metrics.duration.WithLabelValues(m.Topic).Observe(time.Since(start).Seconds())
		switch class {
		case "":
			return true
		case errclass.Canceled:
			return false
		case errclass.Poison, errclass.Permanent:
			history = append(history, dlq.Attempt{At: time.Now(), Error: err.Error(), Class: string(class)})
			return c.deadLetter(ctx, m, err, class, history)
		}
		if ctx.Err() != nil {
			return false
		}
		history = append(history, dlq.Attempt{At: time.Now(), Error: err.Error(), Class: string(class)})
		if c.exhausted(attempt, first) {
			c.metrics.exhausted.WithLabelValues(m.Topic).Inc()
			cause := fmt.Errorf("still failing after %d in-place attempts over %s: %w",
				attempt, time.Since(first).Round(time.Millisecond), err)
			c.logger.ErrorContext(ctx, "in-place retries exhausted; dead-lettering the record", "topic", m.Topic,
				"partition", m.Partition, "offset", m.Offset, "attempts", attempt, "error", err.Error())
			return c.deadLetter(ctx, m, cause, errclass.Transient, history)
		}
		wait := c.cfg.InfraBackoff.Delay(attempt)
		c.logger.WarnContext(ctx, "handling failed; retrying the record in place", "topic", m.Topic,
			"partition", m.Partition, "offset", m.Offset, "attempt", attempt, "retry_in", wait.String(), "error", err.Error())
		if attempt == c.cfg.StuckAfter {
			// Logged, not paged: dlq-admin's stall detector owns the
			// partition-stalled alert (it sees every group's commits), so
			// one blocked partition is one page from one service.
			c.logger.ErrorContext(ctx, "partition blocked: a record keeps failing in place", "topic", m.Topic,
				"partition", m.Partition, "offset", m.Offset, "attempts", attempt, "error", err.Error())
		}
		if !backoff.Sleep(ctx, wait) {
			return false
		}
	}
}

// exhausted reports whether a record that failed attempt times since first
// has used up its in-place retries. The planted defect disables the bound.
func (c *Consumer) exhausted(attempt int, first time.Time) bool {
	if c.cfg.PermanentAsTransient {
		return false
	}
	return attempt >= c.cfg.RetryInPlaceAttempts || time.Since(first) >= c.cfg.RetryInPlaceFor
}

// deadLetter publishes the record to its dead-letter topic with the error,
// its class and the attempts made, and waits for the ack; until Kafka takes
// it the record is not committed. The publish is retried within the same
// bound as the handler; past it the record is left undone (the partition is
// rewound and the record comes back on a later poll) and an alert says so.
// A published letter is counted and logged by the dead-letter writer; it
// pages from dlq-admin once stored there, never from here.
func (c *Consumer) deadLetter(ctx context.Context, m inbox.Message, cause error, class errclass.Class, history []dlq.Attempt) bool {
	l := m.Letter().WithFailure(dlq.Failure{Err: cause, Class: class, RetryCount: len(history), History: history}, time.Now())
	rec, err := l.Record()
	if err != nil {
		c.logger.ErrorContext(ctx, "cannot build dead letter", "error", err.Error())
		return false
	}
	first := time.Now()
	for attempt := 1; ; attempt++ {
		err := c.cl.ProduceSync(ctx, rec).FirstErr()
		if err == nil {
			c.letters.Written(ctx, l)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if attempt >= c.cfg.RetryInPlaceAttempts || time.Since(first) >= c.cfg.RetryInPlaceFor {
			c.alerts.Raise(ctx, alert.Alert{Key: alert.DeadLetterPublishFailedKey(m.Topic), Severity: alert.Critical,
				Summary: "payout-worker cannot publish a dead letter; the record will be redelivered",
				Details: map[string]any{"topic": m.Topic, "partition": m.Partition, "offset": m.Offset, "error": err.Error()}})
			return false
		}
		wait := c.cfg.InfraBackoff.Delay(attempt)
		c.logger.WarnContext(ctx, "dead-letter publish failed; retrying", "error", err.Error(), "retry_in", wait.String())
		if !backoff.Sleep(ctx, wait) {
			return false
		}
	}
}

func outcome(class errclass.Class) string {
	if class == "" {
		return "ok"
	}
	return string(class)
}

// graceContext is a context that ends Grace after parent does.
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

// Metrics are the consumer's Prometheus metrics.
type Metrics struct {
	handled   *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	exhausted *prometheus.CounterVec
	progress  *prometheus.GaugeVec
	lag       *prometheus.GaugeVec
}

// NewMetrics registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_consumer_messages_total", Help: "Messages handled, by topic and outcome.",
		}, []string{"topic", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "aegis_consumer_handle_seconds", Help: "Time to handle one message.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30},
		}, []string{"topic"}),
		exhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_consumer_retry_exhausted_total", Help: "Records whose in-place retries ran out (then dead-lettered), by topic.",
		}, []string{"topic"}),
		progress: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aegis_consumer_last_progress_timestamp_seconds",
			Help: "Unix time this worker last committed an offset on a partition.",
		}, []string{"topic", "partition"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aegis_consumer_lag",
			Help: "Records after the last one this worker finished on a partition, from the fetch's high watermark.",
		}, []string{"topic", "partition"}),
	}
	reg.MustRegister(m.handled, m.duration, m.exhausted, m.progress, m.lag)
	return m
}
