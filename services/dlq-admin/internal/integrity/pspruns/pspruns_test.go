package pspruns_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/pspruns"
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
	fixture.PSPRun{Status: fixture.RunSucceeded}.Insert(t, db.Pool)
	fixture.PSPRun{Status: fixture.RunSucceeded, DisagreementCount: 1, DisagreementsNew: 1,
		Disagreements: []byte(`[{"provider":"stripe","kind":"paid_at_psp_not_succeeded","payout_id":"p-1","psp_object_id":"po_1","psp_status":"paid","ledger_status":"FAILED","detail":"paid at the PSP; FAILED here","state":"new"}]`)}.Insert(t, db.Pool)
	r := &raised{}
	w := pspruns.NewWatcher(db.As(t, migrations.RoleDLQAdmin), r, 0, lifecycle.Deps{})

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
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM psp_run_alerts`).Scan(&alerted))
	require.Equal(t, 1, alerted)

	fixture.PSPRun{Status: fixture.RunFailed, Trigger: "manual", Error: "stripe: read events: 503"}.Insert(t, db.Pool)
	n, err = w.Check(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, pspruns.AlertKeyFailed, r.alerts[1].Key)
	require.Equal(t, alert.Error, r.alerts[1].Severity)
}

// A disagreement still open from an earlier run does not page again; the
// run that finds it gone raises one notice naming it.
func TestWatcherPagesOnlyForNewDisagreementsAndNoticesCleared(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	var first, second, third int64
	insertRun := func(count, fresh, open, cleared int, dis string) int64 {
		return fixture.PSPRun{Status: fixture.RunSucceeded, DisagreementCount: count, DisagreementsNew: fresh,
			DisagreementsOpen: open, DisagreementsCleared: cleared, Disagreements: []byte(dis)}.Insert(t, db.Pool)
	}
	d := func(state string) string {
		return `[{"provider":"stripe","kind":"paid_at_psp_not_succeeded","payout_id":"p-7","psp_object_id":"po_7","detail":"paid at the PSP; FAILED here","state":"` + state + `"}]`
	}
	first = insertRun(1, 1, 0, 0, d("new"))
	second = insertRun(1, 0, 1, 0, d("still_open"))
	third = insertRun(0, 0, 0, 1, `[]`)
	fixture.Disagreement{Kind: "paid_at_psp_not_succeeded", PayoutID: "p-7", PSPObjectID: "po_7", Detail: "paid at the PSP; FAILED here",
		FirstSeenRun: first, LastSeenRun: second, ClearedRun: third}.Insert(t, db.Pool)

	r := &raised{}
	n, err := pspruns.NewWatcher(db.As(t, migrations.RoleDLQAdmin), r, 0, lifecycle.Deps{}).Check(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the still-open run is not alerted on")
	require.Len(t, r.alerts, 2)
	require.Equal(t, pspruns.AlertKey, r.alerts[0].Key)
	require.Equal(t, alert.Critical, r.alerts[0].Severity)
	require.Contains(t, r.alerts[0].Summary, "p-7")
	require.Equal(t, pspruns.AlertKeyCleared, r.alerts[1].Key)
	require.Equal(t, alert.Info, r.alerts[1].Severity)
	require.Contains(t, r.alerts[1].Summary, "p-7")
	var alerted []int64
	rows, err := db.Pool.Query(ctx, `SELECT run_id FROM psp_run_alerts ORDER BY run_id`)
	require.NoError(t, err)
	alerted, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Equal(t, []int64{first, third}, alerted)
}

// A request is the run record, its River job (for webhook-api) and its
// audit row, in one transaction; a second request while it is active is
// ErrBusy and leaves no job, record or audit row behind.
func TestRequestQueuesTheRunsRiverJobInItsTransaction(t *testing.T) {
	t.Parallel()
	db, s := newStore(t)
	ctx := context.Background()
	run, err := s.Request(ctx, "bob")
	require.NoError(t, err)
	require.Equal(t, "requested", run.Status)
	count := func(q string, args ...any) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, q, args...).Scan(&n))
		return n
	}
	require.Equal(t, 1, count(`SELECT count(*) FROM river_job WHERE kind = 'psp_reconcile' AND queue = 'psp_reconcile'
		AND state = 'available' AND (args->>'run_id')::bigint = $1`, run.ID))

	_, err = s.Request(ctx, "carol")
	require.ErrorIs(t, err, pspruns.ErrBusy)
	require.Equal(t, 1, count(`SELECT count(*) FROM river_job`))
	require.Equal(t, 1, count(`SELECT count(*) FROM psp_reconciliation_runs`))
	require.Equal(t, 1, count(`SELECT count(*) FROM audit_log`))

	// A job that cannot be queued rolls the record back.
	_, err = db.Pool.Exec(ctx, `UPDATE psp_reconciliation_runs SET status = 'succeeded', finished_at = now()`)
	require.NoError(t, err)
	_, err = pspruns.New(db.As(t, migrations.RoleDLQAdmin), failingEnqueuer{}).Request(ctx, "dave")
	require.ErrorContains(t, err, "queue River job")
	require.Equal(t, 1, count(`SELECT count(*) FROM psp_reconciliation_runs`))
}

// newStore is a run store on a fresh database, queuing River jobs with an
// insert-only client as dlq-admin does.
func newStore(t *testing.T) (*pgtest.DB, *pspruns.Store) {
	t.Helper()
	db := pgtest.New(t)
	pool := db.As(t, migrations.RoleDLQAdmin)
	enq, err := jobs.InsertOnly(pool, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return db, pspruns.New(pool, enq)
}

type failingEnqueuer struct{}

func (failingEnqueuer) InsertTx(context.Context, pgx.Tx, river.JobArgs, *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	return nil, errors.New("queue down")
}

// An active run whose River job was discarded (a crash on its last attempt,
// which River's rescuer discards without running the worker) would answer
// every later request 409 when no schedule runs to end it
// (PSP_RECONCILE_INTERVAL=0). The next request ends it as failed, with why,
// and is queued; a run whose job is still live keeps refusing.
func TestRequestEndsARunWhoseRiverJobIsGone(t *testing.T) {
	t.Parallel()
	db, s := newStore(t)
	ctx := context.Background()
	stuck, err := s.Request(ctx, "bob")
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `UPDATE psp_reconciliation_runs SET status = 'running', started_at = now(), locked_by = 'dead-attempt'`)
	require.NoError(t, err)

	// Live (available, then retryable): still busy.
	_, err = s.Request(ctx, "carol")
	require.ErrorIs(t, err, pspruns.ErrBusy)
	_, err = db.Pool.Exec(ctx, `UPDATE river_job SET state = 'retryable'`)
	require.NoError(t, err)
	_, err = s.Request(ctx, "carol")
	require.ErrorIs(t, err, pspruns.ErrBusy)

	// Discarded: the run is ended and the new request goes through.
	_, err = db.Pool.Exec(ctx, `UPDATE river_job SET state = 'discarded', finalized_at = now()`)
	require.NoError(t, err)
	next, err := s.Request(ctx, "carol")
	require.NoError(t, err)
	require.Equal(t, "requested", next.Status)
	old, err := s.Get(ctx, stuck.ID)
	require.NoError(t, err)
	require.Equal(t, "failed", old.Status)
	require.NotNil(t, old.FinishedAt)
	require.NotNil(t, old.Error)
	require.Contains(t, *old.Error, "River job ended without finishing the run")
	var live int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'available' AND (args->>'run_id')::bigint = $1`, next.ID).Scan(&live))
	require.Equal(t, 1, live, "the new run's job is queued")
}

// A double payment found by a run pages critical naming every object the
// PSP holds for the payout, not only the first.
func TestWatcherPagesADoublePaymentNamingBothObjects(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	fixture.PSPRun{Status: fixture.RunSucceeded, DisagreementCount: 1, DisagreementsNew: 1,
		Disagreements: []byte(`[{"provider":"stripe","kind":"double_payment_at_psp","payout_id":"p-2","psp_object_id":"po_a","psp_object_ids":["po_a","po_b"],"psp_status":"paid","ledger_status":"SUCCEEDED","detail":"2 live objects at the PSP for one payout","state":"new"}]`)}.Insert(t, db.Pool)
	r := &raised{}
	n, err := pspruns.NewWatcher(db.As(t, migrations.RoleDLQAdmin), r, 0, lifecycle.Deps{}).Check(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Len(t, r.alerts, 1)
	require.Equal(t, alert.Critical, r.alerts[0].Severity)
	require.Contains(t, r.alerts[0].Summary, "double_payment_at_psp payout=p-2 psp=po_a,po_b")
}

// Two requests at once (two dlq-admin replicas, each on its own pool):
// one run is recorded and queued, the other request is ErrBusy and leaves
// no run, job or audit row.
func TestConcurrentRequestsRecordOneRun(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	stores := make([]*pspruns.Store, 2)
	for i := range stores {
		pool := db.As(t, migrations.RoleDLQAdmin)
		enq, err := jobs.InsertOnly(pool, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		stores[i] = pspruns.New(pool, enq)
	}
	start := make(chan struct{})
	errs := make(chan error, len(stores))
	for i, s := range stores {
		go func() {
			<-start
			_, err := s.Request(ctx, fmt.Sprintf("operator-%d", i))
			errs <- err
		}()
	}
	close(start)
	var ok, busy int
	for range stores {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case errors.Is(err, pspruns.ErrBusy):
			busy++
		default:
			t.Fatalf("request: %v", err)
		}
	}
	require.Equal(t, 1, ok)
	require.Equal(t, 1, busy)
	count := func(q string) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, q).Scan(&n))
		return n
	}
	require.Equal(t, 1, count(`SELECT count(*) FROM psp_reconciliation_runs WHERE status = 'requested' AND trigger = 'manual'`))
	require.Equal(t, 1, count(`SELECT count(*) FROM river_job WHERE kind = 'psp_reconcile'`))
	require.Equal(t, 1, count(`SELECT count(*) FROM audit_log`))
}

// held is a Raiser that holds the first alert's transaction open until
// released: the run's claim is then uncommitted while another replica
// looks.
type held struct {
	raised
	entered, release chan struct{}
	once             sync.Once
}

func (h *held) Raise(ctx context.Context, a alert.Alert) {
	h.raised.Raise(ctx, a)
	h.once.Do(func() {
		close(h.entered)
		<-h.release
	})
}

// waitForLockWait polls until some session of the test's database waits for
// a lock: another replica's claim is queued behind the held one.
func waitForLockWait(t *testing.T, db *pgtest.DB) {
	t.Helper()
	ctx := context.Background()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var waiting int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
		if waiting > 0 {
			return
		}
		select {
		case <-deadline:
			t.Fatal("no session waits for a lock")
		case <-tick.C:
		}
	}
}

// Two dlq-admin replicas (two pools) check at once while the first holds
// its claim of a run uncommitted: the second waits for it, then claims
// nothing, so the run is alerted on once. So during the rollout (the
// bridge trigger marks the run under its row lock) and after the contract
// drops the bridge (the claim's ON CONFLICT alone).
func TestReplicasCheckingAtOnceAlertOnARunOnce(t *testing.T) {
	t.Parallel()
	for _, contracted := range []bool{false, true} {
		t.Run(fmt.Sprintf("contracted=%v", contracted), func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t)
			ctx := context.Background()
			if contracted {
				_, err := db.Pool.Exec(ctx, `DROP TRIGGER psp_run_alerts_bridge ON psp_run_alerts`)
				require.NoError(t, err)
			}
			fixture.PSPRun{Status: fixture.RunFailed, Error: "stripe: read events: 503"}.Insert(t, db.Pool)
			first := &held{entered: make(chan struct{}), release: make(chan struct{})}
			second := &raised{}
			a := pspruns.NewWatcher(db.As(t, migrations.RoleDLQAdmin), first, 0, lifecycle.Deps{})
			b := pspruns.NewWatcher(db.As(t, migrations.RoleDLQAdmin), second, 0, lifecycle.Deps{})

			type result struct {
				n   int
				err error
			}
			release := sync.OnceFunc(func() { close(first.release) })
			t.Cleanup(release) // a failing test does not leave the first replica waiting
			aDone, bDone := make(chan result, 1), make(chan result, 1)
			go func() { n, err := a.Check(ctx); aDone <- result{n, err} }()
			<-first.entered
			go func() { n, err := b.Check(ctx); bDone <- result{n, err} }()
			waitForLockWait(t, db)
			release()

			ra, rb := <-aDone, <-bDone
			require.NoError(t, ra.err)
			require.NoError(t, rb.err)
			require.Equal(t, 1, ra.n)
			require.Zero(t, rb.n)
			require.Len(t, first.alerts, 1)
			require.Equal(t, pspruns.AlertKeyFailed, first.alerts[0].Key)
			require.Empty(t, second.alerts)
			var claims int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM psp_run_alerts`).Scan(&claims))
			require.Equal(t, 1, claims)
		})
	}
}

// oldUnalerted is the previous release's watcher's claim of a run (before
// migration 000033): it locks the run's row and marks alerted_at.
const oldUnalerted = `SELECT id FROM psp_reconciliation_runs
	WHERE (disagreements_new > 0 OR disagreements_cleared > 0 OR status = 'failed') AND alerted_at IS NULL AND finished_at IS NOT NULL
	ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`

// During a rollout the previous release's watcher still marks
// psp_reconciliation_runs.alerted_at. A run it alerted on, or is alerting
// on (its row locked, the mark not yet committed), is not alerted on
// again; and a run this release alerted on carries the mark, so the
// previous release does not alert on it either.
func TestARunThePreviousReleaseAlertedOnIsNotAlertedAgain(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	insertFailed := func() int64 {
		return fixture.PSPRun{Status: fixture.RunFailed, Error: "stripe: 503"}.Insert(t, db.Pool)
	}
	// The previous release's watcher: dlq-admin's role keeps its grants on
	// psp_reconciliation_runs until the contract.
	old := db.As(t, migrations.RoleDLQAdmin)
	r := &raised{}
	w := pspruns.NewWatcher(db.As(t, migrations.RoleDLQAdmin), r, 0, lifecycle.Deps{})

	// Alerted on by the previous release, committed.
	marked := insertFailed()
	tx, err := old.Begin(ctx)
	require.NoError(t, err)
	var id int64
	require.NoError(t, tx.QueryRow(ctx, oldUnalerted).Scan(&id))
	require.Equal(t, marked, id)
	_, err = tx.Exec(ctx, `UPDATE psp_reconciliation_runs SET alerted_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	n, err := w.Check(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, r.alerts)

	// Being alerted on by the previous release: this one waits for it and
	// then leaves the run.
	marking := insertFailed()
	tx, err = old.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(ctx, oldUnalerted).Scan(&id))
	require.Equal(t, marking, id)
	_, err = tx.Exec(ctx, `UPDATE psp_reconciliation_runs SET alerted_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	done := make(chan error, 1)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) }) // a failing test does not leave the check waiting
	go func() {
		n, err := w.Check(ctx)
		if err == nil && n != 0 {
			err = fmt.Errorf("alerted on %d run(s) the previous release is alerting on", n)
		}
		done <- err
	}()
	waitForLockWait(t, db)
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-done)
	require.Empty(t, r.alerts)

	// Alerted on by this release: the previous release finds nothing.
	fresh := insertFailed()
	n, err = w.Check(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Len(t, r.alerts, 1)
	require.Contains(t, r.alerts[0].Summary, fmt.Sprintf("run %d failed", fresh))
	err = old.QueryRow(ctx, oldUnalerted).Scan(&id)
	require.ErrorIs(t, err, pgx.ErrNoRows)

	var claimed []int64
	rows, err := db.Pool.Query(ctx, `SELECT run_id FROM psp_run_alerts ORDER BY run_id`)
	require.NoError(t, err)
	claimed, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Equal(t, []int64{fresh}, claimed)
}
