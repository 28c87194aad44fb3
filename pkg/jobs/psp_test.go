package jobs_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// A run is ended only when its River job will never work it (here:
// cancelled through River's API); a run whose job is live is left alone,
// and so is everything once no run is active. Both callers (dlq-admin's
// request, webhook-api's schedule) do it with their own role's grants:
// through psp_reconciliation_runs_for_ops and end_orphaned_psp_run.
func TestEndOrphanedPSPRunEndsOnlyARunWithoutALiveJob(t *testing.T) {
	t.Parallel()
	for _, role := range []string{migrations.RoleDLQAdmin, migrations.RoleWebhookAPI} {
		t.Run(role, func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t)
			pool := db.As(t, role)
			ctx := context.Background()
			enq, err := jobs.InsertOnly(db.Pool, slog.New(slog.DiscardHandler))
			require.NoError(t, err)

			var run, jobID int64
			require.NoError(t, pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
				run = fixture.PSPRun{Trigger: "manual", RequestedBy: "test"}.Insert(t, tx)
				res, err := enq.InsertTx(ctx, tx, jobs.PSPReconcileArgs{RunID: run}, nil)
				if err != nil {
					return err
				}
				jobID = res.Job.ID
				return nil
			}))
			end := func() (int64, bool) {
				var id int64
				var ok bool
				require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					id, ok, err = jobs.EndOrphanedPSPRun(ctx, tx, "its job is gone")
					return err
				}))
				return id, ok
			}
			status := func() (s string, why *string) {
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status, error FROM psp_reconciliation_runs WHERE id = $1`, run).
					Scan(&s, &why))
				return s, why
			}

			_, ok := end()
			require.False(t, ok, "its job is available: the run is not orphaned")
			s, why := status()
			require.Equal(t, "requested", s)
			require.Nil(t, why)

			// A live job of another run does not keep this one alive.
			_, err = enq.Insert(ctx, jobs.PSPReconcileArgs{RunID: run + 1000}, nil)
			require.NoError(t, err)
			_, err = enq.JobCancel(ctx, jobID)
			require.NoError(t, err)
			id, ok := end()
			require.True(t, ok)
			require.Equal(t, run, id)
			s, why = status()
			require.Equal(t, "failed", s)
			require.NotNil(t, why)
			require.Equal(t, "its job is gone", *why)

			_, ok = end()
			require.False(t, ok, "no active run left")
		})
	}
}

// webhook-api's function ends only a run still requested or running: a
// finished run is left as it is (NULL), whoever asks, and a reason is
// required.
func TestEndOrphanedPSPRunFunctionRefusesAFinishedRun(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	run := fixture.PSPRun{Status: fixture.RunSucceeded}.Insert(t, db.Pool)
	pool := db.As(t, migrations.RoleDLQAdmin)

	var ended *int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT end_orphaned_psp_run($1, 'its job is gone')`, run).Scan(&ended))
	require.Nil(t, ended)
	var status string
	var why *string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status, error FROM psp_reconciliation_runs WHERE id = $1`, run).Scan(&status, &why))
	require.Equal(t, "succeeded", status)
	require.Nil(t, why)

	_, err := pool.Exec(ctx, `SELECT end_orphaned_psp_run($1, ' ')`, run)
	require.ErrorContains(t, err, "says why")
}
