package pspsync

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/lifecycle"
)

// WorkerConfig is when runs happen.
type WorkerConfig struct {
	// Owner names this process in psp_reconciliation_runs.locked_by.
	Owner string
	// Interval between scheduled runs (PSP_RECONCILE_INTERVAL); 0: only
	// runs an operator requests.
	Interval time.Duration
	// Poll is how often requested runs are looked for (default 2s).
	Poll time.Duration
	// Lease is how long a claimed run is held without renewal (default
	// 1m, renewed every third of it).
	Lease time.Duration
}

// Worker schedules runs and works them, one at a time across replicas:
// the run table's partial unique index admits one active run, and a
// claimed run is leased (renewed while it works; a dead worker's run is
// taken over when its lease lapses).
type Worker struct {
	cfg    WorkerConfig
	runs   *Runs
	rec    *Reconciler
	logger *slog.Logger
	clock  func() time.Time

	finished  *prometheus.CounterVec
	recovered prometheus.Counter
	disagreed prometheus.Gauge
	open      *prometheus.GaugeVec
}

// NewWorker returns the worker; deps.Registerer takes its metrics.
func NewWorker(cfg WorkerConfig, runs *Runs, rec *Reconciler, deps lifecycle.Deps) (*Worker, error) {
	deps = deps.WithDefaults()
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = time.Minute
	}
	if cfg.Owner == "" {
		return nil, errors.New("pspsync: worker owner is required")
	}
	w := &Worker{cfg: cfg, runs: runs, rec: rec, logger: deps.Logger, clock: deps.Clock,
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "aegis_psp_reconciliation_runs_total",
			Help: "PSP reconciliation runs finished, by status."}, []string{"status"}),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{Name: "aegis_psp_reconciliation_recovered_events_total",
			Help: "PSP events stored by the reconciliation because their webhook never came."}),
		disagreed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "aegis_psp_reconciliation_disagreements",
			Help: "Disagreements between the PSPs and the ledger found by the latest run."}),
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "aegis_psp_disagreements_open",
			Help: "Disagreements between the PSPs and the ledger open now (found and not cleared since), by provider and kind."},
			[]string{"provider", "kind"}),
	}
	for _, c := range []prometheus.Collector{w.finished, w.recovered, w.disagreed, w.open} {
		if err := deps.Registerer.Register(c); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Run requests scheduled runs and works requested ones until ctx ends.
func (w *Worker) Run(ctx context.Context) error {
	t := time.NewTicker(w.cfg.Poll)
	defer t.Stop()
	for {
		w.Tick(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Tick requests a scheduled run when one is due and works one requested
// run if there is one. Failures are logged; the next tick tries again.
func (w *Worker) Tick(ctx context.Context) {
	if w.cfg.Interval > 0 {
		if _, err := w.runs.RequestScheduled(ctx, w.cfg.Interval); err != nil && ctx.Err() == nil {
			w.logger.WarnContext(ctx, "psp reconciliation: schedule", "error", err)
		}
	}
	c, ok, err := w.runs.Claim(ctx, w.cfg.Owner, w.cfg.Lease)
	if err != nil {
		if ctx.Err() == nil {
			w.logger.WarnContext(ctx, "psp reconciliation: claim", "error", err)
		}
		return
	}
	if ok {
		w.work(ctx, c)
	}
}

func (w *Worker) work(ctx context.Context, c Claimed) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	renewed := make(chan struct{})
	go func() { // the lease lasts while the run works
		defer close(renewed)
		t := time.NewTicker(w.cfg.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				if ok, err := w.runs.Renew(runCtx, c.ID, w.cfg.Owner, w.cfg.Lease); err == nil && !ok {
					w.logger.WarnContext(ctx, "psp reconciliation: lease lost", "run_id", c.ID)
					cancel()
					return
				}
			}
		}
	}()
	start := w.clock()
	w.logger.InfoContext(ctx, "psp reconciliation started", "run_id", c.ID, "trigger", c.Trigger)
	rep, err := w.rec.Run(runCtx, c.ID, c.Now)
	cancel()
	<-renewed
	if ctx.Err() != nil {
		// Stopping: hand the run back for the next worker.
		if rerr := w.runs.Release(context.WithoutCancel(ctx), c.ID, w.cfg.Owner); rerr != nil {
			w.logger.Warn("psp reconciliation: release", "run_id", c.ID, "error", rerr)
		}
		return
	}
	if ferr := w.runs.Finish(ctx, c.ID, w.cfg.Owner, rep, err); ferr != nil {
		w.logger.ErrorContext(ctx, "psp reconciliation: store the report", "run_id", c.ID, "error", ferr)
		return
	}
	status := StatusSucceeded
	if err != nil {
		status = StatusFailed
	}
	w.finished.WithLabelValues(status).Inc()
	w.recovered.Add(float64(rep.Recovered))
	w.disagreed.Set(float64(len(rep.Disagreements)))
	w.setOpen(ctx)
	attrs := []any{"run_id", c.ID, "status", status, "events_found", rep.Found, "recovered", rep.Recovered,
		"present", rep.Present, "disagreements", len(rep.Disagreements), "took", w.clock().Sub(start).String()}
	if err != nil {
		w.logger.ErrorContext(ctx, "psp reconciliation failed", append(attrs, "error", err)...)
		return
	}
	if len(rep.Disagreements) > 0 {
		w.logger.ErrorContext(ctx, "psp reconciliation found disagreements (dlq-admin alerts)", attrs...)
		return
	}
	w.logger.InfoContext(ctx, "psp reconciliation finished", attrs...)
}

// setOpen sets aegis_psp_disagreements_open from psp_disagreements (every
// provider and kind, so a cleared one goes back to 0).
func (w *Worker) setOpen(ctx context.Context) {
	open, err := w.runs.OpenDisagreements(ctx)
	if err != nil {
		w.logger.WarnContext(ctx, "psp reconciliation: open disagreements gauge", "error", err)
		return
	}
	for _, p := range w.rec.providers() {
		for _, k := range Kinds() {
			w.open.WithLabelValues(p, k).Set(float64(open[[2]string{p, k}]))
		}
	}
}

// OpenGauge is aegis_psp_disagreements_open (for tests).
func (w *Worker) OpenGauge() *prometheus.GaugeVec { return w.open }
