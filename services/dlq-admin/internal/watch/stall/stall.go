package stall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/watch"
)

// Raiser is what the detector alerts through: *alert.Alerter.
type Raiser interface {
	Raise(ctx context.Context, a alert.Alert)
}

// Config tunes the detector.
type Config struct {
	// Groups are the consumer groups watched (STALL_GROUPS).
	Groups []string
	// After is how long a partition with lag may go without its commit
	// moving before it is stalled (STALL_AFTER).
	After time.Duration
	// Interval is how often the groups are looked at (STALL_CHECK_INTERVAL).
	Interval time.Duration
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	var errs []error
	if len(c.Groups) == 0 {
		errs = append(errs, config.Invalid("Groups", "must name at least one group"))
	}
	if c.After <= 0 {
		errs = append(errs, config.Invalid("After", "must be positive"))
	}
	if c.Interval <= 0 {
		errs = append(errs, config.Invalid("Interval", "must be positive"))
	}
	return errors.Join(errs...)
}

type partition struct {
	group, topic string
	p            int32
}

type progress struct {
	commit int64
	since  time.Time
}

// Stalled describes one stalled partition.
type Stalled struct {
	Group     string
	Topic     string
	Partition int32
	Member    string // member id, client id and host; "none" when no member holds it
	Lag       int64
	Commit    int64
	Since     time.Time // when the commit last moved (or was first seen)
}

// Detector finds stalled partitions.
type Detector struct {
	cfg     Config
	adm     *kadm.Client
	raiser  Raiser
	logger  *slog.Logger
	now     func() time.Time
	seen    map[partition]progress
	lag     *prometheus.GaugeVec
	moved   *prometheus.GaugeVec
	stalled *prometheus.GaugeVec
}

// New returns a detector over adm and registers its gauges on
// deps.Registerer.
func New(cfg Config, adm *kadm.Client, raiser Raiser, deps lifecycle.Deps) (*Detector, error) {
	deps = deps.WithDefaults()
	logger, reg, now := deps.Logger, deps.Registerer, deps.Clock
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	labels := []string{"group", "topic", "partition"}
	d := &Detector{cfg: cfg, adm: adm, raiser: raiser, logger: logger.With("component", "stall"), now: now,
		seen: map[partition]progress{},
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aegis_consumer_group_lag",
			Help: "Records on a partition after the group's committed offset, as the group coordinator reports it.",
		}, labels),
		moved: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aegis_consumer_group_last_progress_timestamp_seconds",
			Help: "Unix time the group's committed offset on a partition last moved (or was first seen by this dlq-admin).",
		}, labels),
		stalled: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aegis_consumer_group_stalled",
			Help: "1 when a partition has lag and its committed offset has not moved for STALL_AFTER.",
		}, labels),
	}
	for _, c := range []prometheus.Collector{d.lag, d.moved, d.stalled} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register stall metrics: %w", err)
		}
	}
	return d, nil
}

// Run checks on every Interval until ctx is done. A failed check (Kafka
// unreachable) is logged and tried again on the next tick.
func (d *Detector) Run(ctx context.Context) error {
	return watch.Run(ctx, watch.Task{Every: d.cfg.Interval,
		Do:     func(ctx context.Context) error { _, err := d.Check(ctx); return err },
		Failed: func(err error) { d.logger.Warn("consumer stall check failed", "error", err.Error()) }})
}

// Check looks at every group once, updates the gauges, raises an alert for
// each stalled partition and returns them.
func (d *Detector) Check(ctx context.Context) ([]Stalled, error) {
	lags, err := d.adm.Lag(ctx, d.cfg.Groups...)
	if err != nil {
		return nil, fmt.Errorf("describe consumer group lag: %w", err)
	}
	now := d.now()
	var out []Stalled
	var errs []error
	for _, g := range lags.Sorted() {
		if err := g.Error(); err != nil {
			errs = append(errs, fmt.Errorf("group %s: %w", g.Group, err))
			continue
		}
		for _, m := range g.Lag.Sorted() {
			if m.Err != nil {
				continue
			}
			k := partition{g.Group, m.Topic, m.Partition}
			p, ok := d.seen[k]
			if !ok || p.commit != m.Commit.At {
				p = progress{commit: m.Commit.At, since: now}
				d.seen[k] = p
			}
			labels := []string{g.Group, m.Topic, strconv.Itoa(int(m.Partition))}
			d.lag.WithLabelValues(labels...).Set(float64(m.Lag))
			d.moved.WithLabelValues(labels...).Set(float64(p.since.Unix()))
			if m.Lag <= 0 || now.Sub(p.since) < d.cfg.After {
				d.stalled.WithLabelValues(labels...).Set(0)
				continue
			}
			d.stalled.WithLabelValues(labels...).Set(1)
			s := Stalled{Group: g.Group, Topic: m.Topic, Partition: m.Partition, Member: member(m.Member),
				Lag: m.Lag, Commit: m.Commit.At, Since: p.since}
			out = append(out, s)
			d.raise(ctx, s, now)
		}
	}
	return out, errors.Join(errs...)
}

func (d *Detector) raise(ctx context.Context, s Stalled, now time.Time) {
	for_ := now.Sub(s.Since).Round(time.Second)
	d.logger.ErrorContext(ctx, "consumer partition stalled", "group", s.Group, "topic", s.Topic, "partition", s.Partition,
		"member", s.Member, "lag", s.Lag, "committed_offset", s.Commit, "no_progress_for", for_.String())
	d.raiser.Raise(ctx, alert.Alert{
		Key:      alert.PartitionStalledKey(s.Group, s.Topic, s.Partition),
		Severity: alert.Critical,
		Summary: fmt.Sprintf("consumer group %s makes no progress on %s partition %d (member %s): lag %d, commit unchanged for %s",
			s.Group, s.Topic, s.Partition, s.Member, s.Lag, for_),
		Details: map[string]any{"group": s.Group, "topic": s.Topic, "partition": s.Partition, "member": s.Member,
			"lag": s.Lag, "committed_offset": s.Commit, "no_progress_since": s.Since.UTC().Format(time.RFC3339)},
	})
}

// member names a group member as an operator can find it: its member id,
// client id and host (and instance id when static).
func member(m *kadm.DescribedGroupMember) string {
	if m == nil {
		return "none"
	}
	s := fmt.Sprintf("%s (client %s on %s", m.MemberID, m.ClientID, m.ClientHost)
	if m.InstanceID != nil && *m.InstanceID != "" {
		s += ", instance " + *m.InstanceID
	}
	return s + ")"
}
