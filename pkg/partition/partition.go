package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/aegis-payments/aegis/pkg/dbgauge"
	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/partition/sqlcdb"
)

const (
	// Queue is the River queue of the maintenance job.
	Queue = "partition"
	// DefaultInterval is how often the job runs: partitions are made two
	// weeks ahead, so an hour leaves hundreds of runs to fail before a row
	// finds none, and a drop skipped for its lock is tried again soon.
	DefaultInterval = time.Hour
	// jobTimeout bounds one run: a few catalog statements per table, each
	// bounded by maintain_partitions' own lock_timeout.
	jobTimeout = 2 * time.Minute
)

// Result is what one maintenance of a table did.
type Result struct {
	Created, Dropped, Skipped int
}

// Maintain creates table's partitions ahead and drops those past its
// retention, in one transaction of its own.
func Maintain(ctx context.Context, pool *pgxpool.Pool, table string) (Result, error) {
	r, err := sqlcdb.New(pool).Maintain(ctx, table)
	if err != nil {
		return Result{}, fmt.Errorf("maintain partitions of %s: %w", table, err)
	}
	return Result{Created: r.Created, Dropped: r.Dropped, Skipped: r.Skipped}, nil
}

// MaintainArgs is the River job that maintains Tables' partitions.
type MaintainArgs struct {
	Tables []string `json:"tables"`
}

// Kind names the job in river_job.kind.
func (MaintainArgs) Kind() string { return "partition_maintain" }

// InsertOpts puts the job on Queue.
func (MaintainArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: Queue} }

type worker struct {
	river.WorkerDefaults[MaintainArgs]
	pool   *pgxpool.Pool
	logger *slog.Logger
}

func (w *worker) Timeout(*river.Job[MaintainArgs]) time.Duration { return jobTimeout }

// Work maintains every table of the job; one table failing does not keep
// the others from theirs, and fails the job so that River retries it.
func (w *worker) Work(ctx context.Context, job *river.Job[MaintainArgs]) error {
	var errs []error
	for _, table := range job.Args.Tables {
		r, err := Maintain(ctx, w.pool, table)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if r.Created+r.Dropped+r.Skipped > 0 {
			w.logger.Info("partitions maintained", "table", table, "created", r.Created, "dropped", r.Dropped,
				"drops_skipped_for_lock", r.Skipped)
		}
	}
	return errors.Join(errs...)
}

// Config is a service's partition keeping.
type Config struct {
	// Tables are the tables of partition_policies the service keeps (its
	// own; maintain_partitions refuses one with no policy).
	Tables []string
	// Interval between runs (DefaultInterval when zero).
	Interval time.Duration
	// FetchPoll is how often River polls for the job (River's default when
	// zero).
	FetchPoll time.Duration
}

// Keeper is a lifecycle.Component: a River client working Queue and a loop
// that queues the job, unique per Interval, at Start and every Interval.
type Keeper struct {
	runner   *jobs.Runner
	tables   []string
	interval time.Duration
	logger   *slog.Logger

	mu   sync.Mutex
	stop chan struct{}
	done chan struct{}
}

// New returns the Keeper of cfg.Tables on pool.
func New(pool *pgxpool.Pool, cfg Config, deps lifecycle.Deps) (*Keeper, error) {
	if len(cfg.Tables) == 0 {
		return nil, errors.New("partition: Tables: at least one is required")
	}
	if cfg.Interval < 0 {
		return nil, errors.New("partition: Interval must not be negative")
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	deps = deps.WithDefaults()
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &worker{pool: pool, logger: deps.Logger}); err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	r, err := jobs.New(pool, jobs.Config{Name: "partition", Workers: workers,
		Queues:      map[string]river.QueueConfig{Queue: {MaxWorkers: 1}},
		RescueAfter: jobTimeout, FetchPoll: cfg.FetchPoll,
		// A rare job on a pool that serves the webhooks: poll, hold no
		// connection for LISTEN.
		PollOnly: true}, deps)
	if err != nil {
		return nil, err
	}
	return &Keeper{runner: r, tables: cfg.Tables, interval: cfg.Interval, logger: deps.Logger}, nil
}

// Runner is the Keeper's River client (tests inspect its jobs).
func (k *Keeper) Runner() *jobs.Runner { return k.runner }

// Start starts River and the loop that queues the job.
func (k *Keeper) Start(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stop != nil {
		return nil
	}
	if err := k.runner.Start(ctx); err != nil {
		return err
	}
	k.stop, k.done = make(chan struct{}), make(chan struct{})
	go k.loop(context.WithoutCancel(ctx), k.stop, k.done)
	return nil
}

// Stop stops the loop, then River (see jobs.Runner.Stop).
func (k *Keeper) Stop(ctx context.Context) error {
	k.mu.Lock()
	stop, done := k.stop, k.done
	k.stop = nil
	k.mu.Unlock()
	if stop == nil {
		return nil
	}
	close(stop)
	<-done
	return k.runner.Stop(ctx)
}

func (k *Keeper) loop(ctx context.Context, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(k.interval)
	defer t.Stop()
	for {
		k.queue(ctx)
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// queue inserts the job unless one was inserted in this period already
// (by this replica or another).
func (k *Keeper) queue(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, dbgauge.Timeout)
	defer cancel()
	_, err := k.runner.Client().Insert(ctx, MaintainArgs{Tables: k.tables}, &river.InsertOpts{
		Queue: Queue, UniqueOpts: river.UniqueOpts{ByPeriod: k.interval},
	})
	if err != nil {
		// The next tick queues it; AegisPartitionsAheadShort pages long
		// before a row finds no partition.
		k.logger.Warn("partition: queueing the maintenance job failed", "error", err.Error())
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
