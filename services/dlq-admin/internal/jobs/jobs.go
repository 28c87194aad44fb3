package jobs

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/recon"
)

// Defaults.
const (
	// DefaultRescueAfter is how long a job may run without its worker
	// finishing it before River hands it to another client (the worker is
	// taken for dead). Longer than a replay slice and a reconciliation.
	DefaultRescueAfter = 5 * time.Minute
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
type Runner = jobs.Runner

// New returns the runner of replays' bulk jobs and rec's scheduled checks
// (rec may be nil: no reconciliation), and makes replays queue its jobs on
// it.
func New(pool *pgxpool.Pool, replays *replay.Service, rec *recon.Reconciler, cfg Config, deps lifecycle.Deps) (*Runner, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	stopping := make(chan struct{})
	rw, err := replay.NewWorker(replays, replay.WorkerConfig{Rate: cfg.ReplayRate, Slice: cfg.ReplaySlice,
		Batch: cfg.ReplayBatch, Stopping: stopping})
	if err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, rw); err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	queues := map[string]river.QueueConfig{replay.Queue: {MaxWorkers: cfg.ReplayWorkers}}
	var schedules []jobs.Schedule
	if rec != nil {
		if err := river.AddWorkerSafely(workers, recon.NewWorker(rec)); err != nil {
			return nil, fmt.Errorf("jobs: %w", err)
		}
		queues[recon.Queue] = river.QueueConfig{MaxWorkers: 1}
		if cfg.ReconcileInterval > 0 {
			schedules = append(schedules, recon.Schedule(cfg.ReconcileInterval))
		}
	}
	r, err := jobs.New(pool, jobs.Config{Name: "jobs", Workers: workers, Queues: queues, Schedules: schedules,
		RescueAfter: cfg.RescueAfter, FetchPoll: cfg.FetchPoll, OnStop: func() { close(stopping) }}, deps)
	if err != nil {
		return nil, err
	}
	replays.WithJobs(r.Client())
	return r, nil
}

// InsertOnly returns a River client that queues jobs and works none (no
// queues, no workers, no leader): for a Service whose jobs another process
// works, and for tests that queue jobs before a Runner starts.
func InsertOnly(pool *pgxpool.Pool, logger *slog.Logger) (*river.Client[pgx.Tx], error) {
	return jobs.InsertOnly(pool, logger)
}
