package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/dbgauge"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/partition/sqlcdb"
)

const (
	// DefaultInterval is how often the job runs: partitions are made two
	// weeks ahead, so an hour leaves hundreds of runs to fail before a row
	// finds none, and a drop skipped for its lock is tried again soon.
	DefaultInterval = time.Hour
	// runTimeout bounds one call of maintain_partitions: a few catalog
	// statements, each lock bounded by its own lock_timeout, and at most
	// keysPerCall keys deleted.
	runTimeout = 2 * time.Minute
	// keysPerCall is the most dedupe keys one maintain_partitions call
	// trims (000044: batches of 10 000, up to 100 000, in the call's one
	// transaction). A call that trimmed this many may have left more.
	keysPerCall = 100_000
	// DefaultTrimBudget is how long one run may go on trimming dedupe keys,
	// call after call: at the rate measured in docs/design/data-lifecycle.md
	// (over a million keys a second) that is hundreds of millions of keys,
	// weeks of 100 events/s. A run that spends it with keys left is followed by another
	// after RetryAfter, not Interval.
	DefaultTrimBudget = 5 * time.Minute
)

// Result is what one maintenance of a table did.
type Result struct {
	Created, Dropped, Skipped int
	// KeysTrimmed counts the dedupe keys older than the horizon deleted.
	KeysTrimmed int
	// TimeScale is the policy's (partition_policies.time_scale): 1 in a
	// deployment.
	TimeScale int
}

// Maintain creates table's partitions ahead and drops those past its
// retention, in one transaction of its own.
func Maintain(ctx context.Context, pool *pgxpool.Pool, table string) (Result, error) {
	r, err := sqlcdb.New(pool).Maintain(ctx, table)
	if err != nil {
		return Result{}, fmt.Errorf("maintain partitions of %s: %w", table, err)
	}
	return Result{Created: r.Created, Dropped: r.Dropped, Skipped: r.Skipped, KeysTrimmed: r.KeysTrimmed, TimeScale: r.TimeScale}, nil
}

// Rescale sets table's time scale (migration 000051's rescale_partitions):
// a partition spans a day / scale, and the policy's premake, retention and
// dedupe horizon shrink with it, so that a soak or a test sees partitions
// made and dropped within minutes. The table must be empty, and pool the
// schema owner's: it is for a database made for a soak or a test, never a
// deployment's (AegisPartitionPolicyScaled pages on one). It returns the
// partitions made.
func Rescale(ctx context.Context, pool *pgxpool.Pool, table string, scale int) (int, error) {
	n, err := sqlcdb.New(pool).Rescale(ctx, sqlcdb.RescaleParams{TableName: table, TimeScale: scale})
	if err != nil {
		return 0, fmt.Errorf("rescale partitions of %s by %d: %w", table, scale, err)
	}
	return n, nil
}

// Config is a service's partition keeping.
type Config struct {
	// Tables are the tables of partition_policies the service keeps (its
	// own; maintain_partitions refuses one with no policy).
	Tables []string
	// Interval between runs (DefaultInterval when zero), divided by the
	// policy's time scale (1 in a deployment): a keeper runs as often per
	// partition at any scale.
	Interval time.Duration
	// RetryAfter is how soon a run that failed, or that spent TrimBudget
	// with dedupe keys left, is tried again (DefaultRetryAfter when zero; at
	// most Interval).
	RetryAfter time.Duration
	// TrimBudget is how long one run may keep calling maintain_partitions
	// while each call trims a full keysPerCall (DefaultTrimBudget when
	// zero).
	TrimBudget time.Duration
}

// DefaultRetryAfter is how soon a failed run is tried again.
const DefaultRetryAfter = time.Minute

// Keeper maintains its tables' partitions at its start and every Interval.
// Every replica runs one: maintain_partitions serialises them (an advisory
// lock per table) and does nothing when nothing is due, so N replicas cost
// N-1 no-op calls an hour and no replica has to be elected.
type Keeper struct {
	pool    *pgxpool.Pool
	cfg     Config
	logger  *slog.Logger
	clock   func() time.Time
	trimmed *prometheus.CounterVec
	behind  *prometheus.GaugeVec
}

// New returns the Keeper of cfg.Tables on pool.
func New(pool *pgxpool.Pool, cfg Config, deps lifecycle.Deps) (*Keeper, error) {
	if len(cfg.Tables) == 0 {
		return nil, errors.New("partition: Tables: at least one is required")
	}
	if cfg.Interval < 0 || cfg.RetryAfter < 0 || cfg.TrimBudget < 0 {
		return nil, errors.New("partition: Interval, RetryAfter and TrimBudget must not be negative")
	}
	if cfg.TrimBudget == 0 {
		cfg.TrimBudget = DefaultTrimBudget
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.RetryAfter == 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	cfg.RetryAfter = min(cfg.RetryAfter, cfg.Interval)
	deps = deps.WithDefaults()
	k := &Keeper{pool: pool, cfg: cfg, logger: deps.Logger, clock: deps.Clock,
		trimmed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_partition_keys_trimmed_total",
			Help: "Dedupe keys older than the horizon and a day this replica's keeper deleted.",
		}, []string{"table"}),
		behind: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aegis_partition_keys_trim_behind_seconds",
			Help: "How long this replica's keeper has ended its runs with expired dedupe keys possibly left (its trim budget spent, or the run failed); 0 once a run trimmed them all.",
		}, []string{"table"}),
	}
	for _, c := range []prometheus.Collector{k.trimmed, k.behind} {
		if err := deps.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("partition: register metrics: %w", err)
		}
	}
	for _, t := range cfg.Tables {
		k.trimmed.WithLabelValues(t)
		k.behind.WithLabelValues(t).Set(0)
	}
	return k, nil
}

// Component is the Keeper as a lifecycle component (a supervised loop:
// a panic is counted and the loop restarted).
func (k *Keeper) Component(deps lifecycle.Deps) lifecycle.Component {
	return lifecycle.Supervised("partition", deps, k.Run)
}

// Run maintains the tables now and then every Interval (RetryAfter after a
// failure, or after a run that spent its TrimBudget with keys left) until
// ctx ends.
func (k *Keeper) Run(ctx context.Context) error {
	behindSince := map[string]time.Time{}
	for {
		caughtUp, scale, err := k.once(ctx, behindSince)
		wait := k.cfg.Interval / time.Duration(max(1, scale))
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			// Partitions are made two weeks ahead: a failed run is retried
			// long before a row finds none, and AegisPartitionsAheadShort
			// pages if runs keep failing.
			wait = min(wait, k.cfg.RetryAfter)
			k.logger.Warn("partition maintenance failed; retrying", "error", err.Error(), "retry_in", wait.String())
		case !caughtUp:
			wait = min(wait, k.cfg.RetryAfter)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Once maintains every table; one table failing does not keep the others
// from theirs. It keeps calling maintain_partitions while each call trims
// a full batch of dedupe keys, for at most TrimBudget a table.
func (k *Keeper) Once(ctx context.Context) error {
	_, _, err := k.once(ctx, map[string]time.Time{})
	return err
}

// once is Once; it reports whether every table's expired keys were all
// trimmed and the largest time scale of their policies, and keeps
// behindSince (per table, since when runs have ended with keys possibly
// left) for the behind gauge.
func (k *Keeper) once(ctx context.Context, behindSince map[string]time.Time) (caughtUp bool, scale int, err error) {
	var errs []error
	caughtUp = true
	for _, table := range k.cfg.Tables {
		start := k.clock()
		done, s, err := k.maintain(ctx, table)
		scale = max(scale, s)
		if err != nil {
			errs = append(errs, err)
		}
		if done && err == nil {
			delete(behindSince, table)
			k.behind.WithLabelValues(table).Set(0)
			continue
		}
		caughtUp = false
		if _, ok := behindSince[table]; !ok {
			behindSince[table] = start
		}
		k.behind.WithLabelValues(table).Set(k.clock().Sub(behindSince[table]).Seconds())
	}
	return caughtUp, scale, errors.Join(errs...)
}

// maintain runs maintain_partitions on table, again while a call trims
// keysPerCall keys and TrimBudget is not spent; done is false when the
// budget ran out with keys possibly left; scale is the policy's time scale.
func (k *Keeper) maintain(ctx context.Context, table string) (done bool, scale int, err error) {
	start := k.clock()
	var total Result
	calls := 0
	defer func() {
		if total.Created+total.Dropped+total.Skipped+total.KeysTrimmed > 0 || (!done && err == nil) {
			k.logger.Info("partitions maintained", "table", table, "created", total.Created, "dropped", total.Dropped,
				"drops_skipped_for_lock", total.Skipped, "dedupe_keys_trimmed", total.KeysTrimmed, "calls", calls,
				"took", k.clock().Sub(start).String(), "dedupe_keys_left", !done && err == nil)
		}
	}()
	for {
		callCtx, cancel := context.WithTimeout(ctx, runTimeout)
		r, err := Maintain(callCtx, k.pool, table)
		cancel()
		if err != nil {
			return false, scale, err
		}
		scale = r.TimeScale
		calls++
		k.trimmed.WithLabelValues(table).Add(float64(r.KeysTrimmed))
		total.Created += r.Created
		total.Dropped += r.Dropped
		total.Skipped += r.Skipped
		total.KeysTrimmed += r.KeysTrimmed
		if r.KeysTrimmed < keysPerCall {
			return true, scale, nil
		}
		if k.clock().Sub(start) >= k.cfg.TrimBudget {
			return false, scale, nil
		}
	}
}

// Gauges reads the partitions of tables when Prometheus scrapes (every
// replica exports the same figures; rules take max or min).
func Gauges(pool *pgxpool.Pool, tables []string, logger *slog.Logger) *dbgauge.Collector {
	aheadDesc := prometheus.NewDesc("aegis_partitions_ahead_seconds",
		"How far ahead of now the table's newest partition reaches (a row past it has no partition and its INSERT fails).",
		[]string{"table"}, nil)
	overdueDesc := prometheus.NewDesc("aegis_partition_retention_overdue_seconds",
		"How long the table's oldest partition has been wholly older than its retention without being dropped (0: none is).",
		[]string{"table"}, nil)
	retentionDesc := prometheus.NewDesc("aegis_partition_retention_seconds",
		"The table's retention (partition_policies): a partition wholly older than it is dropped.",
		[]string{"table"}, nil)
	countDesc := prometheus.NewDesc("aegis_partitions",
		"How many partitions the table has.", []string{"table"}, nil)
	scaleDesc := prometheus.NewDesc("aegis_partition_time_scale",
		"The table's policy time scale (partition_policies.time_scale): 1 in a deployment; N compresses a day of partitions, retention and dedupe horizon into a day / N, for soaks and tests only.",
		[]string{"table"}, nil)
	want := make(map[string]bool, len(tables))
	for _, t := range tables {
		want[t] = true
	}
	return dbgauge.New("partitions", logger, func(ctx context.Context, emit dbgauge.Emit) error {
		rows, err := sqlcdb.New(pool).Status(ctx)
		if err != nil {
			return fmt.Errorf("partition status: %w", err)
		}
		for _, r := range rows {
			if !want[r.TableName] {
				continue
			}
			emit(aheadDesc, r.AheadSeconds, r.TableName)
			emit(overdueDesc, r.OverdueSeconds, r.TableName)
			emit(retentionDesc, r.RetentionSeconds, r.TableName)
			emit(countDesc, float64(r.Partitions), r.TableName)
			emit(scaleDesc, float64(r.TimeScale), r.TableName)
		}
		return nil
	}, aheadDesc, overdueDesc, retentionDesc, countDesc, scaleDesc)
}
