package depth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/watch"
)

// Defaults.
const (
	DefaultCheckInterval  = 30 * time.Second
	DefaultSweepInterval  = 5 * time.Second
	DefaultDepthThreshold = 100
	// sweepBatch bounds one sweep transaction.
	sweepBatch = 500
	// maxErrorText bounds the error text an alert carries.
	maxErrorText = 500
)

// Raiser is what the monitor alerts through: *alert.Alerter.
type Raiser interface {
	Raise(ctx context.Context, a alert.Alert)
}

// Config tunes the monitor. Zero values take the defaults.
type Config struct {
	// CheckInterval is how often depth gauges are refreshed and the depth
	// threshold checked (DLQ_CHECK_INTERVAL).
	CheckInterval time.Duration
	// SweepInterval is how often letters written by other services are
	// looked for; letters stored by this process's consumer wake it sooner.
	SweepInterval time.Duration
	// DepthThreshold is the open depth of one topic above which
	// dlq_depth:<topic> is raised (DLQ_DEPTH_ALERT_THRESHOLD).
	DepthThreshold int64
}

func (c Config) withDefaults() Config {
	if c.CheckInterval == 0 {
		c.CheckInterval = DefaultCheckInterval
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.DepthThreshold == 0 {
		c.DepthThreshold = DefaultDepthThreshold
	}
	return c
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.CheckInterval <= 0 {
		errs = append(errs, config.Invalid("CheckInterval", "must be positive"))
	}
	if c.SweepInterval <= 0 {
		errs = append(errs, config.Invalid("SweepInterval", "must be positive"))
	}
	if c.DepthThreshold < 1 {
		errs = append(errs, config.Invalid("DepthThreshold", "must be at least 1"))
	}
	return errors.Join(errs...)
}

// Monitor raises dead-letter alerts and exports depth gauges.
type Monitor struct {
	cfg    Config
	store  *store.Store
	raiser Raiser
	logger *slog.Logger
	now    func() time.Time
	depth  *prometheus.GaugeVec
	oldest *prometheus.GaugeVec
	open   *prometheus.GaugeVec
	wake   chan struct{}
	// classes are the (topic, class) series of open exported so far: one
	// whose letters are all resolved goes to 0, never missing (a rule's
	// alert resolves on 0; a missing series would look like a gone exporter).
	classes map[[2]string]bool
}

// New returns a monitor and registers its gauges on deps.Registerer.
func New(cfg Config, st *store.Store, raiser Raiser, deps lifecycle.Deps) (*Monitor, error) {
	deps = deps.WithDefaults()
	logger, reg, now := deps.Logger, deps.Registerer, deps.Clock
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Monitor{
		cfg: cfg, store: st, raiser: raiser, logger: logger.With("component", "monitor"), now: now,
		wake: make(chan struct{}, 1), classes: map[[2]string]bool{},
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aegis_dlq_depth",
			Help: "Dead letters in the store by original topic and status (open, replayed, discarded).",
		}, []string{"topic", "status"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aegis_dlq_oldest_open_age_seconds",
			Help: "Age of the oldest open dead letter by original topic, since it failed; 0 when none is open.",
		}, []string{"topic"}),
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricOpenLetters,
			Help: "Open dead letters by original topic and error class, from the store (every replica exports the same figure: take max). " +
				"AegisDeadLetterOpen pages while one is open.",
		}, []string{"topic", "class"}),
	}
	for _, c := range []prometheus.Collector{m.depth, m.oldest, m.open} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register monitor metrics: %w", err)
		}
	}
	return m, nil
}

// Notify wakes the sweep: new letters were stored. It never blocks.
func (m *Monitor) Notify() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run sweeps and checks at once and then on their intervals (a sweep also
// whenever Notify wakes it) until ctx is done. Errors (Postgres
// unavailable) are logged and retried on the next tick.
func (m *Monitor) Run(ctx context.Context) error {
	return watch.Run(ctx,
		watch.Task{Every: m.cfg.SweepInterval, Wake: m.wake, Do: m.sweepAll, Failed: func(err error) {
			m.logger.Error("dead-letter alert sweep failed", "error", err.Error())
		}},
		watch.Task{Every: m.cfg.CheckInterval, Do: m.Check, Failed: func(err error) {
			m.logger.Error("dead-letter depth check failed", "error", err.Error())
		}},
	)
}

// sweepAll sweeps until a batch comes back short: every letter nobody was
// alerted about has its alert.
func (m *Monitor) sweepAll(ctx context.Context) error {
	for {
		n, err := m.Sweep(ctx)
		if err != nil {
			return err
		}
		if n < sweepBatch {
			return nil
		}
	}
}

// Sweep raises the alert of up to one batch of letters nobody was alerted
// about and reports how many it claimed.
func (m *Monitor) Sweep(ctx context.Context) (int, error) {
	return m.store.AlertPending(ctx, sweepBatch, func(letters []store.Summary) {
		for _, l := range letters {
			m.raiser.Raise(ctx, LetterAlert(l))
		}
	})
}

// LetterAlert is the alert for one new dead letter.
func LetterAlert(l store.Summary) alert.Alert {
	errText := l.Error
	if len(errText) > maxErrorText {
		errText = errText[:maxErrorText] + "…"
	}
	severity := alert.Error
	if l.ErrorClass == string(eventproof.Class) {
		// A money event nobody proved webhook-api verified: someone who
		// can produce to the topic tried to move money. It moved nothing,
		// but the credential it used must be found and revoked.
		severity = alert.Critical
	}
	return alert.Alert{
		Key:      alert.DeadLetterKey(l.OriginalTopic, l.ErrorClass),
		Severity: severity,
		Summary:  fmt.Sprintf("dead letter on %s (%s): an operator must replay or discard it", l.OriginalTopic, l.ErrorClass),
		Details: map[string]any{
			"dead_letter_id": l.ID, "topic": l.OriginalTopic, "error_class": l.ErrorClass, "error": errText,
			"correlation_id": l.CorrelationID, "source": l.Source,
		},
	}
}

// MetricOpenLetters is the gauge of open dead letters by topic and class:
// the condition AegisDeadLetterOpen (and AegisDeadLetterUnprovenEvent)
// pages on, in place of a page per letter.
const MetricOpenLetters = "aegis_dlq_open_letters"

// Check refreshes the depth gauges and raises dlq_depth:<topic> for every
// topic whose open depth is over the threshold.
func (m *Monitor) Check(ctx context.Context) error {
	st, err := m.store.Stats(ctx, m.now())
	if err != nil {
		return err
	}
	classes, err := m.store.OpenByClass(ctx)
	if err != nil {
		return err
	}
	now := make(map[[2]string]bool, len(classes))
	for _, c := range classes {
		k := [2]string{c.Topic, c.Class}
		now[k] = true
		m.classes[k] = true
		m.open.WithLabelValues(c.Topic, c.Class).Set(float64(c.Open))
	}
	for k := range m.classes {
		if !now[k] {
			m.open.WithLabelValues(k[0], k[1]).Set(0)
		}
	}
	for _, t := range st.Topics {
		for status, n := range t.ByStatus {
			m.depth.WithLabelValues(t.Topic, status).Set(float64(n))
		}
		age := 0.0
		if t.OldestOpenAge != nil {
			age = t.OldestOpenAge.Seconds()
		}
		m.oldest.WithLabelValues(t.Topic).Set(age)
		open := t.ByStatus[store.StatusOpen]
		if open > m.cfg.DepthThreshold {
			m.raiser.Raise(ctx, alert.Alert{
				Key:      alert.DLQDepthKey(t.Topic),
				Severity: alert.Warning,
				Summary:  fmt.Sprintf("%d open dead letters on %s (threshold %d)", open, t.Topic, m.cfg.DepthThreshold),
				Details: map[string]any{"topic": t.Topic, "open": open, "threshold": m.cfg.DepthThreshold,
					"oldest_open_age_seconds": int64(age)},
			})
		}
	}
	return nil
}
