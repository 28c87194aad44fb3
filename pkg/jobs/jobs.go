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
	"github.com/riverqueue/river/rivertype"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
)

// hardStopWait bounds the wait for River's goroutines once the running jobs
// were cancelled (they return at their next statement).
const hardStopWait = 10 * time.Second

// Enqueuer inserts River jobs in the caller's transaction (a
// *river.Client[pgx.Tx], working or insert-only): a job is inserted in the
// transaction that creates its operator-facing row, so neither exists
// without the other.
type Enqueuer interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// Config is one service's River client.
type Config struct {
	// Name names the runner in logs and errors (e.g. "dlq-admin/jobs").
	Name string
	// Workers are the service's workers (river.AddWorkerSafely).
	Workers *river.Workers
	// Queues are the queues this client works, with their concurrency.
	Queues map[string]river.QueueConfig
	// Schedules are the service's periodic jobs. Every replica inserts
	// them, unique per period (Schedule), not River's elected leader: the
	// leader is one client of the whole River schema, whichever service's
	// it is, and River's leader inserts only its own client's periodic
	// jobs.
	Schedules []Schedule
	// Kinds is every job kind's timeout (zero fields: the defaults); every
	// client of the suite must have the same (Kinds). The rescue horizon is
	// Kinds.RescueAfter, and a worker that states no Timeout (a test's) gets
	// that.
	Kinds Kinds
	// FetchPoll is how often River polls for jobs when no notification
	// came (zero: River's default, 1s).
	FetchPoll time.Duration
	// PollOnly makes River poll (every FetchPoll) instead of holding a
	// LISTEN connection of the pool for the client's lifetime: for a
	// service whose pool serves a hot path and whose jobs are rare.
	PollOnly bool
	// OnStop, if set, is called once when Stop begins, before River stops:
	// workers put their jobs down at a safe point.
	OnStop func()
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.Workers == nil {
		errs = append(errs, config.Invalid("Workers", "are required"))
	}
	if len(c.Queues) == 0 {
		errs = append(errs, config.Invalid("Queues", "at least one is required"))
	}
	if err := c.Kinds.WithDefaults().Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.FetchPoll < 0 {
		errs = append(errs, config.Invalid("FetchPoll", "must not be negative"))
	}
	if err := validateSchedules(c.Schedules); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Runner is a service's River client as a lifecycle.Component.
type Runner struct {
	name      string
	client    *river.Client[pgx.Tx]
	logger    *slog.Logger
	schedules []Schedule
	onStop    func()
	stopOnce  sync.Once

	mu            sync.Mutex
	started       bool
	stopped       bool
	stopSchedules context.CancelFunc
	scheduling    sync.WaitGroup
}

// New returns the runner of cfg's workers on pool.
func New(pool *pgxpool.Pool, cfg Config, deps lifecycle.Deps) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	deps = deps.WithDefaults()
	if cfg.Name == "" {
		cfg.Name = "jobs"
	}
	var cooldown time.Duration // River's default, unless polls are more frequent
	if cfg.FetchPoll > 0 && cfg.FetchPoll < river.FetchCooldownDefault {
		cooldown = cfg.FetchPoll
	}
	logger := deps.Logger.With("component", cfg.Name)
	kinds := cfg.Kinds.WithDefaults()
	// River's rescuer runs on the schema's leader only, and judges every
	// job by the leader's worker for its kind: this client must know the
	// other services' kinds as they do.
	if err := kinds.addStandIns(cfg.Workers, cfg.Queues); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	rescueAfter := kinds.RescueAfter()
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		FetchCooldown: cooldown,
		Logger:        logger,
		Queues:        cfg.Queues,
		Workers:       cfg.Workers,
		// No PeriodicJobs: River's leader would insert them only when this
		// client leads the schema (Config.Schedules).
		// The suite's horizon, no longer than any kind's timeout: each job
		// is rescued once its own kind's timeout has passed (Kinds).
		RescueStuckJobsAfter: rescueAfter,
		// A worker without a Timeout of its own is cancelled after
		// RescueAfter (River's default is a minute). Beware: River never
		// rescues the job of a worker whose Timeout is negative (none).
		JobTimeout: rescueAfter,
		// No RetryPolicy: River's default on every client, so a rescued
		// job's retry is the same whichever client leads.
		// REINDEX needs the indexes' owner, the migrator; the services'
		// roles are not (migrations 000017 and 000018 grant DML only).
		ReindexerSchedule: river.NeverSchedule(),
		FetchPollInterval: cfg.FetchPoll,
		PollOnly:          cfg.PollOnly,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: River client: %w", cfg.Name, err)
	}
	return &Runner{name: cfg.Name, client: client, logger: logger, schedules: cfg.Schedules, onStop: cfg.OnStop}, nil
}

// Client is the River client (tests insert and inspect jobs with it).
func (r *Runner) Client() *river.Client[pgx.Tx] { return r.client }

// Start starts working jobs and inserting the schedules' jobs. Only Stop
// stops them (ctx's cancellation is not passed on: a service stops its
// parts in order).
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.stopped {
		return nil
	}
	if err := r.client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("%s: start River: %w", r.name, err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.stopSchedules = cancel
	for _, s := range r.schedules {
		r.scheduling.Go(func() { r.runSchedule(sctx, s) })
	}
	r.started = true
	return nil
}

// Stop stops working jobs: the schedules stop, OnStop tells the workers,
// River stops gracefully; at ctx's end the jobs still running are
// cancelled. It returns once the schedules' and River's goroutines have. A
// second Stop is harmless.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	if !r.started || r.stopped {
		r.mu.Unlock()
		return nil
	}
	r.stopped = true
	r.mu.Unlock()
	// No new scheduled job once stopping: the other replicas insert them.
	r.stopSchedules()
	r.scheduling.Wait()
	if r.onStop != nil {
		r.stopOnce.Do(r.onStop)
	}
	err := r.client.Stop(ctx)
	if err == nil {
		return nil
	}
	if ctx.Err() == nil {
		return fmt.Errorf("%s: stop River: %w", r.name, err)
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hardStopWait)
	defer cancel()
	if cerr := r.client.StopAndCancel(hctx); cerr != nil {
		return fmt.Errorf("%s: River did not stop within %s of cancelling its jobs: %w", r.name, hardStopWait, cerr)
	}
	return fmt.Errorf("%w (%w)", lifecycle.ErrHardStop, context.Cause(ctx))
}

// InsertOnly returns a River client that queues jobs and works none (no
// queues, no workers, no leader): for a process whose jobs another process
// works, and for tests that queue jobs before a Runner starts.
func InsertOnly(pool *pgxpool.Pool, logger *slog.Logger) (*river.Client[pgx.Tx], error) {
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("jobs: insert-only River client: %w", err)
	}
	return client, nil
}
