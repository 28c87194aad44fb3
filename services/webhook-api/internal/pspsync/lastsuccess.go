package pspsync

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/dbgauge"
)

// lastSuccessGauge is aegis_psp_reconciliation_last_success_timestamp_seconds:
// when the latest succeeded run finished, read from psp_reconciliation_runs
// at each scrape. Every webhook-api replica exports the same figure (any
// replica may work a run, and one that restarted or never worked one knows
// it all the same), so rules take max. No run succeeded yet, or the query
// failed (logged): no sample, rather than a 0 that reads as "very stale".
func lastSuccessGauge(runs *Runs, logger *slog.Logger) *dbgauge.Collector {
	desc := prometheus.NewDesc("aegis_psp_reconciliation_last_success_timestamp_seconds",
		"Unix time the latest succeeded PSP reconciliation run finished (from the database; absent before the first).",
		nil, nil)
	return dbgauge.New("latest succeeded PSP reconciliation run", logger, func(ctx context.Context, emit dbgauge.Emit) error {
		t, ok, err := runs.LastSucceeded(ctx)
		if err != nil || !ok {
			return err
		}
		emit(desc, float64(t.UnixNano())/1e9)
		return nil
	}, desc)
}
