package recon

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/dbgauge"
)

// latestGauges exports the latest stored run, read from reconciliation_runs
// at every scrape (one row through reconciliation_runs_latest_idx), so
// every replica exports it whichever ran the check, and a restarted one at
// once: the periodic check runs on one replica, once per interval, and not
// again at a start within the interval. Before any run is stored, neither
// gauge is exported.
func (r *Reconciler) latestGauges() *dbgauge.Collector {
	found := prometheus.NewDesc("aegis_reconciliation_discrepancies",
		"Problems the latest stored ledger integrity check found (unbalanced transactions, wallet mismatches, negative wallets, payout holds, disputes, receivables and system accounts that disagree).",
		nil, nil)
	lastRun := prometheus.NewDesc("aegis_reconciliation_last_run_timestamp_seconds",
		"When the latest stored ledger integrity check finished (Unix time).", nil, nil)
	return dbgauge.New("latest reconciliation run", r.logger, func(ctx context.Context, emit dbgauge.Emit) error {
		if r.pool == nil {
			return nil // no database (a test of the registry)
		}
		run, err := r.Latest(ctx)
		if errors.Is(err, ErrNoRun) {
			return nil
		}
		if err != nil {
			return err
		}
		emit(found, float64(run.Summary.Discrepancies()))
		emit(lastRun, float64(run.FinishedAt.Unix()))
		return nil
	}, found, lastRun)
}
