package pspsync

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// lastSuccessQueryTimeout bounds the query one scrape makes.
const lastSuccessQueryTimeout = 2 * time.Second

// lastSuccess is aegis_psp_reconciliation_last_success_timestamp_seconds:
// when the latest succeeded run finished, read from psp_reconciliation_runs
// at each scrape. Every webhook-api replica exports the same figure (any
// replica may work a run, and one that restarted or never worked one knows
// it all the same), so rules take max. No run succeeded yet, or the query
// failed (logged): no sample, rather than a 0 that reads as "very stale".
type lastSuccess struct {
	runs   *Runs
	logger *slog.Logger
	// gauge carries the metric's name and help; Collect sets it and sends
	// it only when there is a success to report.
	gauge prometheus.Gauge
}

func newLastSuccess(runs *Runs, logger *slog.Logger) *lastSuccess {
	return &lastSuccess{runs: runs, logger: logger, gauge: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "aegis_psp_reconciliation_last_success_timestamp_seconds",
		Help: "Unix time the latest succeeded PSP reconciliation run finished (from the database; absent before the first).",
	})}
}

func (l *lastSuccess) Describe(ch chan<- *prometheus.Desc) { l.gauge.Describe(ch) }

func (l *lastSuccess) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), lastSuccessQueryTimeout)
	defer cancel()
	t, ok, err := l.runs.LastSucceeded(ctx)
	if err != nil {
		l.logger.WarnContext(ctx, "psp reconciliation: last success gauge", "error", err)
		return
	}
	if !ok {
		return
	}
	l.gauge.Set(float64(t.UnixNano()) / 1e9)
	ch <- l.gauge
}
