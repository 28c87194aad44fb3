package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/recon"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/replay"
)

// Defaults.
const (
	// DefaultRescueAfter is how long a job may run without its worker
	// finishing it before River hands it to another client (the worker is
	// taken for dead). Longer than a replay slice and a reconciliation.
	DefaultRescueAfter = 5 * time.Minute
	// hardStopWait bounds the wait for River's goroutines once the running
	// jobs were cancelled (they return at their next statement).
	hardStopWait = 10 * time.Second
)

// Config is the runner's settings.
type Config struct {
	// ReplayRate is REPLAY_RATE.
	ReplayRate float64
	// ReplaySlice is how long one work call of a replay job runs (zero:
	// replay.DefaultSlice).
	ReplaySlice time.Duration
	// ReplayBatch is how many letter ids a replay reads at a time (zero:
	// replay.DefaultBatch).
	ReplayBatch int
	// ReplayWorkers is how many replay jobs one client works at once.
	ReplayWorkers int
	// ReconcileInterval is RECONCILE_INTERVAL; zero schedules none (tests).
	ReconcileInterval time.Duration
	// RescueAfter: see DefaultRescueAfter.
	RescueAfter time.Duration
	// FetchPoll is how often River polls for jobs when no notification
	// came (zero: River's default, 1s).
	FetchPoll time.Duration
}

func (c Config) withDefaults() Config {
	if c.ReplaySlice == 0 {
		c.ReplaySlice = replay.DefaultSlice
	}
	if c.ReplayWorkers == 0 {
		c.ReplayWorkers = 2
	}
	if c.RescueAfter == 0 {
		c.RescueAfter = DefaultRescueAfter
	}
	return c
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.ReplayWorkers < 1 {
		errs = append(errs, config.Invalid("ReplayWorkers", "must be at least 1"))
	}
	if c.RescueAfter <= c.ReplaySlice {
		errs = append(errs, config.Invalid("RescueAfter", "must be longer than ReplaySlice: a live worker's job would be rescued"))
	}
	if c.ReconcileInterval < 0 {
		errs = append(errs, config.Invalid("ReconcileInterval", "must not be negative"))
	}
	return errors.Join(errs...)
}

// Runner is dlq-admin's River client as a lifecycle.Component.
type Runner struct {
	client   *river.Client[pgx.Tx]
	logger   *slog.Logger
	stopping chan struct{}
	stopOnce sync.Once

	mu      sync.Mutex
	started bool
	stopped bool
}

// New returns the runner of replays' bulk jobs and rec's scheduled checks
// (rec may be nil: no reconciliation), and makes replays queue its jobs on
// it.
func New(pool *pgxpool.Pool, replays *replay.Service, rec *recon.Reconciler, cfg Config, deps lifecycle.Deps) (*Runner, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	deps = deps.WithDefaults()
	r := &Runner{logger: deps.Logger.With("component", "jobs"), stopping: make(chan struct{})}
	rw, err := replay.NewWorker(replays, replay.WorkerConfig{Rate: cfg.ReplayRate, Slice: cfg.ReplaySlice,
		Batch: cfg.ReplayBatch, Stopping: r.stopping})
	if err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, rw); err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	queues := map[string]river.QueueConfig{replay.Queue: {MaxWorkers: cfg.ReplayWorkers}}
	var periodic []*river.PeriodicJob
	if rec != nil {
		if err := river.AddWorkerSafely(workers, recon.NewWorker(rec)); err != nil {
			return nil, fmt.Errorf("jobs: %w", err)
		}
		queues[recon.Queue] = river.QueueConfig{MaxWorkers: 1}
		if cfg.ReconcileInterval > 0 {
			periodic = append(periodic, recon.PeriodicJob(cfg.ReconcileInterval))
		}
	}
	var cooldown time.Duration // River's default, unless polls are more frequent
	if cfg.FetchPoll > 0 && cfg.FetchPoll < river.FetchCooldownDefault {
		cooldown = cfg.FetchPoll
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		FetchCooldown:        cooldown,
		Logger:               r.logger,
		Queues:               queues,
		Workers:              workers,
		PeriodicJobs:         periodic,
		RescueStuckJobsAfter: cfg.RescueAfter,
		// REINDEX needs the indexes' owner, the migrator; dlq-admin's role
		// is not (migration 000017 grants it DML only).
		ReindexerSchedule: river.NeverSchedule(),
		FetchPollInterval: cfg.FetchPoll,
	})
	if err != nil {
		return nil, fmt.Errorf("jobs: River client: %w", err)
	}
	r.client = client
	replays.WithJobs(client)
	return r, nil
}

// Client is the River client (tests insert and inspect jobs with it).
func (r *Runner) Client() *river.Client[pgx.Tx] { return r.client }

// Start starts working jobs. Only Stop stops them (ctx's cancellation is
// not passed on: a service stops its parts in order).
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.stopped {
		return nil
	}
	if err := r.client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("jobs: start River: %w", err)
	}
	r.started = true
	return nil
}

// Stop stops working jobs: replay workers stop between two letters, River
// stops gracefully; at ctx's end the jobs still running are cancelled. It
// returns once River's goroutines have. A second Stop is harmless.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	if !r.started || r.stopped {
		r.mu.Unlock()
		return nil
	}
	r.stopped = true
	r.mu.Unlock()
	r.stopOnce.Do(func() { close(r.stopping) })
	err := r.client.Stop(ctx)
	if err == nil {
		return nil
	}
	if ctx.Err() == nil {
		return fmt.Errorf("jobs: stop River: %w", err)
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hardStopWait)
	defer cancel()
	if cerr := r.client.StopAndCancel(hctx); cerr != nil {
		return fmt.Errorf("jobs: River did not stop within %s of cancelling its jobs: %w", hardStopWait, cerr)
	}
	return fmt.Errorf("%w (%w)", lifecycle.ErrHardStop, context.Cause(ctx))
}

// InsertOnly returns a River client that queues jobs and works none (no
// queues, no workers, no leader): for a Service whose jobs another process
// works, and for tests that queue jobs before a Runner starts.
func InsertOnly(pool *pgxpool.Pool, logger *slog.Logger) (*river.Client[pgx.Tx], error) {
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("jobs: insert-only River client: %w", err)
	}
	return client, nil
}
