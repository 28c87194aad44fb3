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
	// Kinds is the suite's job kinds' timeouts (pkg/jobs.Kinds): the same
	// on every River client of the schema, webhook-api's included (its
	// PSPRunTimeout is PSP_RECONCILE_RUN_TIMEOUT). A replay job is retried
	// once Kinds.ReplayTimeout has passed since its worker took it (the
	// worker is taken for dead).
	Kinds jobs.Kinds
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
	c.Kinds = c.Kinds.WithDefaults()
	return c
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.ReplayWorkers < 1 {
		errs = append(errs, config.Invalid("ReplayWorkers", "must be at least 1"))
	}
	if c.Kinds.ReplayTimeout <= c.ReplaySlice {
		errs = append(errs, config.Invalid("Kinds.ReplayTimeout", "must be longer than ReplaySlice: a live worker's job would be rescued"))
	}
	if c.ReconcileInterval < 0 {
		errs = append(errs, config.Invalid("ReconcileInterval", "must not be negative"))
	}
	return errors.Join(errs...)
}

// Kinds is the suite's job kinds' timeouts (pkg/jobs.Kinds).
type Kinds = jobs.Kinds

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
		Batch: cfg.ReplayBatch, Timeout: cfg.Kinds.ReplayTimeout, Stopping: stopping})
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
		if err := river.AddWorkerSafely(workers, recon.NewWorker(rec, cfg.Kinds)); err != nil {
			return nil, fmt.Errorf("jobs: %w", err)
		}
		queues[recon.Queue] = river.QueueConfig{MaxWorkers: 1}
		if cfg.ReconcileInterval > 0 {
			schedules = append(schedules, recon.Schedule(cfg.ReconcileInterval))
		}
	}
	r, err := jobs.New(pool, jobs.Config{Name: "jobs", Workers: workers, Queues: queues, Schedules: schedules,
		Kinds: cfg.Kinds, FetchPoll: cfg.FetchPoll, OnStop: func() { close(stopping) }}, deps)
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
