package recon_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/recon"
)

// replica is a dlq-admin replica's reconciler, with a registry of its own,
// as the dlq-admin role.
func replica(t *testing.T, b *bundle) (*recon.Reconciler, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	r, err := recon.New(b.db.As(t, migrations.RoleDLQAdmin), b.alerter,
		lifecycle.Deps{Logger: slog.New(slog.DiscardHandler), Registerer: reg, Clock: time.Now})
	require.NoError(t, err)
	return r, reg
}

func latestGauges(discrepancies int64, finished time.Time) string {
	return `
# HELP aegis_reconciliation_discrepancies Problems the latest stored ledger integrity check found (unbalanced transactions, wallet mismatches, negative wallets, payout holds, disputes, receivables and system accounts that disagree).
# TYPE aegis_reconciliation_discrepancies gauge
aegis_reconciliation_discrepancies ` + strconv.FormatInt(discrepancies, 10) + `
# HELP aegis_reconciliation_last_run_timestamp_seconds When the latest stored ledger integrity check finished (Unix time).
# TYPE aegis_reconciliation_last_run_timestamp_seconds gauge
aegis_reconciliation_last_run_timestamp_seconds ` + strconv.FormatInt(finished.Unix(), 10) + `
`
}

// Every replica, including one started after the check ran elsewhere,
// exports the latest stored run: the check runs on one replica once per
// interval and not again at a restart, so a replica's own memory would say
// "never" (0) and clear the discrepancy alert while the stored run still
// has one.
func TestEveryReplicaExportsTheLatestStoredRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	names := []string{"aegis_reconciliation_discrepancies", "aegis_reconciliation_last_run_timestamp_seconds"}

	_, idle := replica(t, b)
	n, err := testutil.GatherAndCount(idle, names...)
	require.NoError(t, err)
	require.Zero(t, n, "no run stored: no figure, not a zero")

	b.credit(t, "alice", 5000, "pi_1")
	_, err = b.db.Pool.Exec(ctx, `UPDATE wallets SET balance = balance + 1 WHERE kind = 'user' AND owner = 'alice'`)
	require.NoError(t, err)
	ran, err := b.rec.Run(ctx, recon.TriggerScheduled, "")
	require.NoError(t, err)
	require.Equal(t, int64(1), ran.Summary.Discrepancies())

	// A replica that did not run it, and one started afterwards (a
	// restart), export the stored run.
	_, restarted := replica(t, b)
	for _, reg := range []*prometheus.Registry{idle, restarted} {
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(latestGauges(1, ran.FinishedAt)), names...))
	}

	// A later run, wherever it ran, is what all of them export.
	other, _ := replica(t, b)
	_, err = b.db.Pool.Exec(ctx, `UPDATE wallets SET balance = balance - 1 WHERE kind = 'user' AND owner = 'alice'`)
	require.NoError(t, err)
	clean, err := other.Run(ctx, recon.TriggerManual, "ops")
	require.NoError(t, err)
	require.True(t, clean.OK)
	for _, reg := range []*prometheus.Registry{b.reg, idle, restarted} {
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(latestGauges(0, clean.FinishedAt)), names...))
	}
}

// A replica that cannot read the stored run exports nothing rather than a
// zero (which would clear the discrepancy alert and fire the not-running
// one); its other metrics are still scraped.
func TestAReplicaThatCannotReadTheRunExportsNoFigure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.rec.Run(ctx, recon.TriggerScheduled, "")
	require.NoError(t, err)
	pool := b.db.As(t, migrations.RoleDLQAdmin)
	reg := prometheus.NewRegistry()
	_, err = recon.New(pool, b.alerter, lifecycle.Deps{Logger: slog.New(slog.DiscardHandler), Registerer: reg, Clock: time.Now})
	require.NoError(t, err)
	n, err := testutil.GatherAndCount(reg, "aegis_reconciliation_discrepancies", "aegis_reconciliation_last_run_timestamp_seconds")
	require.NoError(t, err)
	require.Equal(t, 2, n)

	pool.Close()
	families, err := reg.Gather()
	require.NoError(t, err, "the scrape itself succeeds")
	for _, f := range families {
		require.NotContains(t, []string{"aegis_reconciliation_discrepancies", "aegis_reconciliation_last_run_timestamp_seconds"}, f.GetName())
	}
}
