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
	// runTimeout bounds one table's run: a few catalog statements, each
	// lock bounded by maintain_partitions' own lock_timeout.
	runTimeout = 2 * time.Minute
)

// Result is what one maintenance of a table did.
type Result struct {
	Created, Dropped, Skipped int
	// KeysTrimmed counts the dedupe keys older than the horizon deleted.
	KeysTrimmed int
}

// Maintain creates table's partitions ahead and drops those past its
// retention, in one transaction of its own.
func Maintain(ctx context.Context, pool *pgxpool.Pool, table string) (Result, error) {
	r, err := sqlcdb.New(pool).Maintain(ctx, table)
	if err != nil {
		return Result{}, fmt.Errorf("maintain partitions of %s: %w", table, err)
	}
	return Result{Created: r.Created, Dropped: r.Dropped, Skipped: r.Skipped, KeysTrimmed: r.KeysTrimmed}, nil
}

// Config is a service's partition keeping.
type Config struct {
	// Tables are the tables of partition_policies the service keeps (its
	// own; maintain_partitions refuses one with no policy).
	Tables []string
	// Interval between runs (DefaultInterval when zero).
	Interval time.Duration
	// RetryAfter is how soon a run that failed is tried again
	// (DefaultRetryAfter when zero; at most Interval).
	RetryAfter time.Duration
}

// DefaultRetryAfter is how soon a failed run is tried again.
const DefaultRetryAfter = time.Minute

// Keeper maintains its tables' partitions at its start and every Interval.
// Every replica runs one: maintain_partitions serialises them (an advisory
// lock per table) and does nothing when nothing is due, so N replicas cost
// N-1 no-op calls an hour and no replica has to be elected.
type Keeper struct {
	pool   *pgxpool.Pool
	cfg    Config
	logger *slog.Logger
}

// New returns the Keeper of cfg.Tables on pool.
func New(pool *pgxpool.Pool, cfg Config, deps lifecycle.Deps) (*Keeper, error) {
	if len(cfg.Tables) == 0 {
		return nil, errors.New("partition: Tables: at least one is required")
	}
	if cfg.Interval < 0 || cfg.RetryAfter < 0 {
		return nil, errors.New("partition: Interval and RetryAfter must not be negative")
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.RetryAfter == 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	cfg.RetryAfter = min(cfg.RetryAfter, cfg.Interval)
	deps = deps.WithDefaults()
	return &Keeper{pool: pool, cfg: cfg, logger: deps.Logger}, nil
}

// Component is the Keeper as a lifecycle component (a supervised loop:
// a panic is counted and the loop restarted).
func (k *Keeper) Component(deps lifecycle.Deps) lifecycle.Component {
	return lifecycle.Supervised("partition", deps, k.Run)
}

// Run maintains the tables now and then every Interval (RetryAfter after a
// failure) until ctx ends.
func (k *Keeper) Run(ctx context.Context) error {
	for {
		wait := k.cfg.Interval
		if err := k.Once(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// Partitions are made two weeks ahead: a failed run is retried
			// long before a row finds none, and AegisPartitionsAheadShort
			// pages if runs keep failing.
			k.logger.Warn("partition maintenance failed; retrying", "error", err.Error(), "retry_in", k.cfg.RetryAfter.String())
			wait = k.cfg.RetryAfter
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
// from theirs.
func (k *Keeper) Once(ctx context.Context) error {
	var errs []error
	for _, table := range k.cfg.Tables {
		ctx, cancel := context.WithTimeout(ctx, runTimeout)
		r, err := Maintain(ctx, k.pool, table)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if r.Created+r.Dropped+r.Skipped+r.KeysTrimmed > 0 {
			k.logger.Info("partitions maintained", "table", table, "created", r.Created, "dropped", r.Dropped,
				"drops_skipped_for_lock", r.Skipped, "dedupe_keys_trimmed", r.KeysTrimmed)
		}
	}
	return errors.Join(errs...)
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
		}
		return nil
	}, aheadDesc, overdueDesc, retentionDesc, countDesc)
}
