package pspruns_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/pspruns"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type raised struct {
	mu     sync.Mutex
	alerts []alert.Alert
}

func (r *raised) Raise(_ context.Context, a alert.Alert) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.alerts = append(r.alerts, a)
}

// A finished run with disagreements raises one critical alert naming them,
// once however often the watcher looks; a failed run raises an error
// alert; a clean run raises none.
func TestWatcherAlertsOncePerRunWithDisagreements(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO psp_reconciliation_runs (status, trigger, started_at, finished_at, disagreement_count, disagreements)
		VALUES ('succeeded', 'scheduled', now(), now(), 0, '[]'),
		       ('succeeded', 'scheduled', now(), now(), 1,
		        '[{"provider":"stripe","kind":"paid_at_psp_not_succeeded","payout_id":"p-1","psp_object_id":"po_1","psp_status":"paid","ledger_status":"FAILED","detail":"paid at the PSP; FAILED here"}]')`)
	require.NoError(t, err)
	r := &raised{}
	w := pspruns.NewWatcher(db.Pool, r, 0, lifecycle.Deps{})

	n, err := w.Check(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Len(t, r.alerts, 1)
	a := r.alerts[0]
	require.Equal(t, pspruns.AlertKey, a.Key)
	require.Equal(t, alert.Critical, a.Severity)
	require.Contains(t, a.Summary, "p-1")
	require.Contains(t, a.Summary, "FAILED")

	n, err = w.Check(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Len(t, r.alerts, 1, "once per run")
	var alerted int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM psp_reconciliation_runs WHERE alerted_at IS NOT NULL`).Scan(&alerted))
	require.Equal(t, 1, alerted)

	_, err = db.Pool.Exec(ctx, `INSERT INTO psp_reconciliation_runs (status, trigger, started_at, finished_at, error)
		VALUES ('failed', 'manual', now(), now(), 'stripe: read events: 503')`)
	require.NoError(t, err)
	n, err = w.Check(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, pspruns.AlertKeyFailed, r.alerts[1].Key)
	require.Equal(t, alert.Error, r.alerts[1].Severity)
}
