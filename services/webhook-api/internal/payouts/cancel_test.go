package payouts_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/payouts"
)

type noNotify struct{}

func (noNotify) Notify() {}

// newPayout creates an INITIALIZED payout through payout-worker's
// create_payout and returns its id.
func newPayout(t *testing.T, db *pgtest.DB, key string) string {
	t.Helper()
	var id string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT id::text FROM create_payout(gen_random_uuid(), 'acme', $1,
		'hash', 'alice', 1500, 'usd', 'acct_123', 'stripe', 'corr', NULL)`, key).Scan(&id))
	return id
}

// waitForLockWait returns once a backend of the database waits for a lock.
func waitForLockWait(t *testing.T, db *pgtest.DB) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n > 0
	}, 10*time.Second, 10*time.Millisecond, "a backend waits for the payout's row lock")
}

func count(t *testing.T, db *pgtest.DB, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// The worker takes the payout up first (its first step locks the row): a
// cancel waits for the lock, then finds the payout taken and changes
// nothing.
func TestCancelWaitsForTheWorkersClaimAndLoses(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	store := payouts.NewStore(db.Pool, noNotify{}, payouts.Limits{})
	id := newPayout(t, db, "key-1")

	worker, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = worker.Rollback(ctx) }()
	var status string
	require.NoError(t, worker.QueryRow(ctx, `SELECT status FROM payouts WHERE id = $1::uuid FOR UPDATE`, id).Scan(&status))
	require.Equal(t, payoutstate.Initialized, payoutstate.Status(status))

	canceled := make(chan error, 1)
	go func() {
		_, err := store.Cancel(ctx, "acme", id)
		canceled <- err
	}()
	waitForLockWait(t, db)
	_, err = worker.Exec(ctx, `UPDATE payouts SET status = $2 WHERE id = $1::uuid`, id, string(payoutstate.Sending))
	require.NoError(t, err)
	require.NoError(t, worker.Commit(ctx))

	require.ErrorIs(t, <-canceled, payouts.ErrNotCancelable)
	require.Equal(t, 1, count(t, db, `SELECT count(*) FROM payouts WHERE id = $1::uuid AND status = $2`, id, string(payoutstate.Sending)))
	require.Equal(t, 1, count(t, db, `SELECT count(*) FROM payout_transitions WHERE payout_id = $1::uuid`, id),
		"only the first transition")
	require.Zero(t, count(t, db, `SELECT count(*) FROM transaction_outbox WHERE payload->>'payout_id' = $1`, id))
}

// The cancel locks the payout first: the worker's first step waits for
// it, then finds a finished payout, whose command it ignores.
func TestWorkersClaimWaitsForTheCancel(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	id := newPayout(t, db, "key-1")

	cancel, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = cancel.Rollback(ctx) }()
	var done bool
	require.NoError(t, cancel.QueryRow(ctx, `SELECT canceled FROM cancel_payout($1::uuid, 'acme')`, id).Scan(&done))
	require.True(t, done)

	claimed := make(chan string, 1)
	claimErr := make(chan error, 1)
	go func() {
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			var status string
			if err := tx.QueryRow(ctx, `SELECT status FROM payouts WHERE id = $1::uuid FOR UPDATE`, id).Scan(&status); err != nil {
				return err
			}
			claimed <- status
			return nil
		})
		claimErr <- err
	}()
	waitForLockWait(t, db)
	require.NoError(t, cancel.Commit(ctx))

	status := payoutstate.Status(<-claimed)
	require.NoError(t, <-claimErr)
	require.Equal(t, payoutstate.Finalized, status)
	require.True(t, status.IgnoresCommands(), "the worker ignores the command of a canceled payout")
	require.Equal(t, 3, count(t, db, `SELECT count(*) FROM payout_transitions WHERE payout_id = $1::uuid`, id))
}

// A cancel answers by the payout's state: canceled once (its outcome
// written once), the same answer again, not found for no payout.
func TestCancelAnswers(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	store := payouts.NewStore(db.Pool, noNotify{}, payouts.Limits{})
	id := newPayout(t, db, "key-1")

	p, err := store.Cancel(ctx, "acme", id)
	require.NoError(t, err)
	require.Equal(t, string(payoutstate.Finalized), p.Status)
	require.Equal(t, payouts.ClassCanceled, p.ErrorClass)
	require.Equal(t, "canceled by client acme", p.LastError)
	var steps []string
	for _, h := range p.History {
		steps = append(steps, h.From+">"+h.To)
	}
	require.Equal(t, []string{">INITIALIZED", "INITIALIZED>FAILED", "FAILED>FINALIZED"}, steps)

	again, err := store.Cancel(ctx, "other", id)
	require.NoError(t, err, "canceled before: the same answer")
	require.Equal(t, "canceled by client acme", again.LastError)
	require.Equal(t, 1, count(t, db, `SELECT count(*) FROM transaction_outbox WHERE event_type = 'payout.canceled'
		AND payload->>'payout_id' = $1 AND payload->>'error' = 'canceled by client acme'`, id))

	_, err = store.Cancel(ctx, "acme", "01930000-0000-7000-8000-000000000000")
	require.ErrorIs(t, err, payouts.ErrNotFound)
}
