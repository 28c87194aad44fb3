package pspsync

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/aegis-payments/aegis/pkg/dbgauge"
	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
)

// DefaultRescueAfter bounds one attempt at a run (River's job timeout: the
// run is cancelled, handed back and retried) and is how long after its
// start a run's River job is taken for a dead worker's and handed to
// another client (River rescues only jobs with a timeout: a worker without
// one would hold a dead worker's run for ever). A run reads a day of each
// PSP's record; half an hour is well above what that takes, and a live
// attempt that outlasts it is cancelled, and its report would be refused
// anyway (ErrNotHeld). It is the kind's timeout in pkg/jobs
// (jobs.DefaultPSPRunTimeout): River's rescuer runs on whichever service's
// client leads the shared schema, and every client states this timeout for
// the kind (dlq-admin's through its stand-in worker).
//
// PSP_RECONCILE_RUN_TIMEOUT sets it (RunnerConfig.Kinds.PSPRunTimeout, and
// dlq-admin reads it too); the payout worker's MONEY_BACK_CREDIT_WAIT
// counts on this bound (config.MinMoneyBackCreditWait), so its default is
// that shared value.
const DefaultRescueAfter = jobs.DefaultPSPRunTimeout

// RunnerConfig is webhook-api's River client for the reconciliation.
type RunnerConfig struct {
	// Interval between scheduled runs (PSP_RECONCILE_INTERVAL); 0: only
	// runs an operator requests.
	Interval time.Duration
	// Kinds is the suite's job kinds' timeouts (pkg/jobs.Kinds), the same
	// as dlq-admin's: PSPRunTimeout is both the run's timeout and the
	// rescue delay (see DefaultRescueAfter; zero takes it).
	Kinds jobs.Kinds
	// FetchPoll is how often River looks for jobs without a notification
	// (zero: River's default).
	FetchPoll time.Duration
}

// NewRunner returns webhook-api's River client (a lifecycle.Component) that
// works the runs (queue jobs.PSPReconcileQueue) and, with an interval,
// schedules them: every replica inserts the scheduled job, unique per
// period (jobs.Schedule), so N replicas request one run, whichever River
// client of the schema leads.
func NewRunner(pool *pgxpool.Pool, runs *Runs, rec *Reconciler, cfg RunnerConfig, deps lifecycle.Deps) (*jobs.Runner, *Worker, error) {
	if cfg.Interval < 0 {
		return nil, nil, errors.New("pspsync: Interval must not be negative")
	}
	cfg.Kinds = cfg.Kinds.WithDefaults()
	deps = deps.WithDefaults()
	stopping := make(chan struct{})
	w, err := NewWorker(runs, rec, stopping, deps)
	if err != nil {
		return nil, nil, err
	}
	w.timeout = cfg.Kinds.PSPRunTimeout
	if cfg.Interval > 0 {
		// Scheduled runs are due every Interval: their age can be alerted
		// on (AegisPSPReconciliationStale). On demand only, it cannot.
		if err := deps.Registerer.Register(lastSuccessGauge(runs, deps.Logger)); err != nil {
			return nil, nil, fmt.Errorf("pspsync: %w", err)
		}
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, w); err != nil {
		return nil, nil, fmt.Errorf("pspsync: %w", err)
	}
	if err := river.AddWorkerSafely(workers, &scheduler{runs: runs, logger: deps.Logger, timeout: cfg.Kinds.PSPScheduleTimeout}); err != nil {
		return nil, nil, fmt.Errorf("pspsync: %w", err)
	}
	var schedules []jobs.Schedule
	if cfg.Interval > 0 {
		schedules = append(schedules, Schedule(cfg.Interval))
	}
	r, err := jobs.New(pool, jobs.Config{Name: "psp-reconcile", Workers: workers,
		// Two: the scheduled job is not queued behind a long run (one run
		// is active at a time all the same: the run table's index).
		Queues:    map[string]river.QueueConfig{jobs.PSPReconcileQueue: {MaxWorkers: 2}},
		Schedules: schedules, Kinds: cfg.Kinds, FetchPoll: cfg.FetchPoll,
		// webhook-api's pool serves the webhooks: River polls (a requested
		// run starts within a second) rather than hold one of its
		// connections for LISTEN.
		PollOnly: true,
		OnStop:   func() { close(stopping) }}, deps)
	if err != nil {
		return nil, nil, err
	}
	return r, w, nil
}

// ScheduledArgs is the River job that requests one scheduled run.
type ScheduledArgs struct{}

// Kind names the job in river_job.kind.
func (ScheduledArgs) Kind() string { return jobs.KindPSPSchedule }

// Schedule requests a run every interval (one per period), the first at a
// replica's start unless one was requested in the current period already
// (a restart or another replica does not request it twice).
func Schedule(interval time.Duration) jobs.Schedule {
	return jobs.Schedule{Interval: interval, RunOnStart: true, Job: func() (river.JobArgs, *river.InsertOpts) {
		return ScheduledArgs{}, &river.InsertOpts{Queue: jobs.PSPReconcileQueue, MaxAttempts: 3}
	}}
}

// scheduler requests a scheduled run: the run record and its River job in
// one transaction. A run requested or running already is this period's
// run; one whose River job is gone (discarded after its last attempt) is
// ended as failed first, so it never blocks the runs after it.
type scheduler struct {
	river.WorkerDefaults[ScheduledArgs]
	runs    *Runs
	logger  *slog.Logger
	timeout time.Duration
}

// Timeout is the kind's (jobs.Kinds.PSPScheduleTimeout), as every River
// client of the suite states it.
func (s *scheduler) Timeout(*river.Job[ScheduledArgs]) time.Duration { return s.timeout }

func (s *scheduler) Work(ctx context.Context, _ *river.Job[ScheduledArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return fmt.Errorf("psp reconciliation schedule: %w", err)
	}
	orphan, ended, err := s.runs.EndOrphaned(ctx, "its River job ended without finishing the run (attempts spent)")
	if err != nil {
		return err
	}
	if ended {
		s.logger.ErrorContext(ctx, "psp reconciliation run abandoned: its River job is gone", "run_id", orphan)
	}
	id, ok, err := s.runs.RequestScheduled(ctx, client)
	if err != nil {
		return err
	}
	if !ok {
		s.logger.InfoContext(ctx, "scheduled psp reconciliation skipped: a run is requested or running")
		return nil
	}
	s.logger.InfoContext(ctx, "scheduled psp reconciliation requested", "run_id", id)
	return nil
}

// Worker works one run per River job (jobs.PSPReconcileArgs): it marks the
// run running under a fencing token (River's job id and attempt, and a
// random suffix), reconciles, and stores the report only while the token
// still holds the run. A rescued or retried attempt takes the run over;
// the earlier attempt, if it was alive after all, then fails to store its
// report (ErrNotHeld). What it did meanwhile is harmless twice: recovered
// events are stored by the PSP's event id (a second store is a duplicate),
// the cursor only moves forward, and disagreements are stored with the
// report, under the token.
type Worker struct {
	river.WorkerDefaults[jobs.PSPReconcileArgs]
	runs     *Runs
	rec      *Reconciler
	logger   *slog.Logger
	clock    func() time.Time
	stopping <-chan struct{}
	timeout  time.Duration

	finished  *prometheus.CounterVec
	recovered prometheus.Counter
	disagreed prometheus.Gauge
	open      *dbgauge.Collector
}

// NewWorker returns the worker; deps.Registerer takes its metrics. When
// stopping closes (the service is stopping), a run in progress is put down:
// handed back to be requested again and its job snoozed for the next client.
func NewWorker(runs *Runs, rec *Reconciler, stopping <-chan struct{}, deps lifecycle.Deps) (*Worker, error) {
	deps = deps.WithDefaults()
	w := &Worker{runs: runs, rec: rec, logger: deps.Logger, clock: deps.Clock, stopping: stopping, timeout: DefaultRescueAfter,
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "aegis_psp_reconciliation_runs_total",
			Help: "PSP reconciliation runs finished, by status."}, []string{"status"}),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{Name: "aegis_psp_reconciliation_recovered_events_total",
			Help: "PSP events stored by the reconciliation because their webhook never came."}),
		disagreed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "aegis_psp_reconciliation_disagreements",
			Help: "Disagreements between the PSPs and the ledger found by the latest run."}),
	}
	w.open = w.openGauge()
	for _, c := range []prometheus.Collector{w.finished, w.recovered, w.disagreed, w.open} {
		if err := deps.Registerer.Register(c); err != nil {
			return nil, err
		}
	}
	// Both series from the start: a counter that appears at its first
	// increment has no increase to show (AegisPSPReconciliationFailing
	// would miss a replica's first failed run).
	for _, s := range []string{StatusSucceeded, StatusFailed} {
		w.finished.WithLabelValues(s)
	}
	return w, nil
}

// Timeout bounds one attempt: the kind's, jobs.Kinds.PSPRunTimeout (River's
// default, a minute, would cancel most runs; none at all would make River
// never rescue the job).
func (w *Worker) Timeout(*river.Job[jobs.PSPReconcileArgs]) time.Duration { return w.timeout }

// Work works run rj.Args.RunID. Its result is River's instruction: nil when
// the run is over (finished, found over, taken over), a snooze when the
// service is stopping, an error to retry later (the run was interrupted or
// its report could not be stored). A run that fails at a PSP is finished
// as failed, not retried: the next run reads the same window again.
func (w *Worker) Work(ctx context.Context, rj *river.Job[jobs.PSPReconcileArgs]) error {
	id := rj.Args.RunID
	token, err := token(rj)
	if err != nil {
		return err
	}
	log := w.logger.With("run_id", id, "river_job_id", rj.ID, "attempt", rj.Attempt)
	c, ok, err := w.runs.Start(ctx, id, token)
	if err != nil {
		return err
	}
	if !ok {
		log.InfoContext(ctx, "psp reconciliation run already over; nothing to do")
		return nil
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	watched := make(chan struct{})
	go func() { // shutdown puts the run down at once
		defer close(watched)
		select {
		case <-w.stopping:
			cancel()
		case <-runCtx.Done():
		}
	}()
	start := w.clock()
	log.InfoContext(ctx, "psp reconciliation started", "trigger", c.Trigger)
	rep, runErr := w.rec.Run(runCtx, id, c.Now)
	interrupted := runCtx.Err() != nil
	cancel()
	<-watched
	if interrupted {
		if rerr := w.runs.Release(context.WithoutCancel(ctx), id, token); rerr != nil {
			log.Warn("psp reconciliation: hand the run back", "error", rerr)
		}
		if ctx.Err() == nil { // stopping: not a failure, no attempt spent
			log.Info("psp reconciliation paused for shutdown; River resumes it")
			return river.JobSnooze(0)
		}
		return fmt.Errorf("psp reconciliation run %d interrupted: %w", id, context.Cause(ctx))
	}
	if ferr := w.runs.Finish(ctx, id, token, rep, runErr); ferr != nil {
		if errors.Is(ferr, ErrNotHeld) {
			log.WarnContext(ctx, "psp reconciliation run taken over by another attempt; this report is dropped")
			return nil
		}
		return fmt.Errorf("psp reconciliation: store the report: %w", ferr)
	}
	status := StatusSucceeded
	if runErr != nil {
		status = StatusFailed
	}
	w.finished.WithLabelValues(status).Inc()
	w.recovered.Add(float64(rep.Recovered))
	w.disagreed.Set(float64(len(rep.Disagreements)))
	attrs := []any{"status", status, "events_found", rep.Found, "recovered", rep.Recovered,
		"present", rep.Present, "disagreements", len(rep.Disagreements), "took", w.clock().Sub(start).String()}
	switch {
	case runErr != nil:
		log.ErrorContext(ctx, "psp reconciliation failed", append(attrs, "error", runErr)...)
	case len(rep.Disagreements) > 0:
		log.ErrorContext(ctx, "psp reconciliation found disagreements (dlq-admin alerts)", attrs...)
	default:
		log.InfoContext(ctx, "psp reconciliation finished", attrs...)
	}
	return nil
}

// token is this work call's fencing token in psp_reconciliation_runs.locked_by.
func token(rj *river.Job[jobs.PSPReconcileArgs]) (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("psp reconciliation token: %w", err)
	}
	return fmt.Sprintf("river-%d-%d-%s", rj.ID, rj.Attempt, hex.EncodeToString(b)), nil
}

// openGauge is aegis_psp_disagreements_open{provider,kind}: the
// disagreements open now (found and not cleared since), read from
// psp_disagreements at each scrape, every provider and kind (0 when none),
// so every replica exports the same figure whichever worked the run, and
// AegisPSPDisagreementOpen (max over the replicas) resolves when a run
// clears them. A read that fails exports nothing for that scrape.
func (w *Worker) openGauge() *dbgauge.Collector {
	desc := prometheus.NewDesc("aegis_psp_disagreements_open",
		"Disagreements between the PSPs and the ledger open now (found and not cleared since), by provider and kind, "+
			"read from the database at each scrape.", []string{"provider", "kind"}, nil)
	return dbgauge.New("open PSP disagreements", w.logger, func(ctx context.Context, emit dbgauge.Emit) error {
		open, err := w.runs.OpenDisagreements(ctx)
		if err != nil {
			return err
		}
		for _, p := range w.rec.providers() {
			for _, k := range Kinds() {
				emit(desc, float64(open[[2]string{p, k}]), p, k)
			}
		}
		return nil
	}, desc)
}

// OpenGauge is aegis_psp_disagreements_open (for tests).
func (w *Worker) OpenGauge() prometheus.Collector { return w.open }
