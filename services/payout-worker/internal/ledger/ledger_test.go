package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
)

func inTx(t *testing.T, db *pgtest.DB, fn func(pgx.Tx) error) error {
	t.Helper()
	return database.InTx(context.Background(), db.Pool, fn)
}

// reconcile asserts the ledger's invariants straight from the tables.
func reconcile(t *testing.T, db *pgtest.DB) {
	t.Helper()
	ctx := context.Background()
	var unbalanced, drift, negative int
	require.NoError(t, db.Pool.QueryRow(ctx, `
		SELECT count(*) FROM (SELECT transaction_id FROM ledger_entries GROUP BY transaction_id, currency HAVING sum(amount) <> 0) x`).Scan(&unbalanced))
	require.NoError(t, db.Pool.QueryRow(ctx, `
		SELECT count(*) FROM wallets w WHERE w.kind = 'user'
		AND w.balance <> coalesce((SELECT sum(amount) FROM ledger_entries e WHERE e.wallet_id = w.id), 0)`).Scan(&drift))
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM wallets WHERE kind = 'user' AND balance < 0`).Scan(&negative))
	require.Zero(t, unbalanced, "every transaction sums to zero")
	require.Zero(t, drift, "every balance equals its entries")
	require.Zero(t, negative, "no negative balance")
}

func TestCreditIsIdempotentPerPayment(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	l := ledger.New(db.Pool)
	ctx := context.Background()
	credit := func() error {
		return inTx(t, db, func(tx pgx.Tx) error {
			return l.Credit(ctx, tx, ledger.Receipt{Provider: "stripe", Reference: "pi_1", UserID: "u1", Amount: 5000, Currency: "usd"})
		})
	}
	require.NoError(t, credit())
	require.ErrorIs(t, credit(), ledger.ErrAlreadyPosted, "charge.succeeded after payment_intent.succeeded credits nothing")
	b, err := ledger.Balance(ctx, db.Pool, "u1", "usd")
	require.NoError(t, err)
	require.EqualValues(t, 5000, b)
	reconcile(t, db)
}

func TestPayoutLifecycleBalances(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	l := ledger.New(db.Pool)
	ctx := context.Background()
	require.NoError(t, inTx(t, db, func(tx pgx.Tx) error {
		return l.Credit(ctx, tx, ledger.Receipt{Provider: "stripe", Reference: "pi_1", UserID: "u1", Amount: 1000, Currency: "usd"})
	}))

	paid := ledger.Payout{ID: "p-paid", UserID: "u1", Provider: "stripe", Amount: 400, Currency: "usd"}
	failed := ledger.Payout{ID: "p-failed", UserID: "u1", Provider: "stripe", Amount: 300, Currency: "usd"}
	require.NoError(t, inTx(t, db, func(tx pgx.Tx) error { return l.Hold(ctx, tx, paid) }))
	require.NoError(t, inTx(t, db, func(tx pgx.Tx) error { return l.Hold(ctx, tx, failed) }))
	b, _ := ledger.Balance(ctx, db.Pool, "u1", "usd")
	require.EqualValues(t, 300, b)

	// Not enough left for another 400. The caller goes on in the same
	// transaction (the payout records FAILED) and commits: the refused hold
	// must leave no transaction behind.
	var refused error
	err := inTx(t, db, func(tx pgx.Tx) error {
		refused = l.Hold(ctx, tx, ledger.Payout{ID: "p-broke", UserID: "u1", Provider: "stripe", Amount: 400, Currency: "usd"})
		_, err := tx.Exec(ctx, `INSERT INTO processed_events (consumer_group, event_id) VALUES ('g', 'after-refusal')`)
		return err
	})
	require.NoError(t, err, "the caller's transaction survives the refusal")
	require.ErrorIs(t, refused, ledger.ErrInsufficientFunds)
	var phantom int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM ledger_transactions WHERE reference = 'p-broke'`).Scan(&phantom))
	require.Zero(t, phantom, "a refused hold leaves no ledger transaction")

	require.NoError(t, inTx(t, db, func(tx pgx.Tx) error { return l.Settle(ctx, tx, paid) }))
	require.NoError(t, inTx(t, db, func(tx pgx.Tx) error { return l.Release(ctx, tx, failed) }))
	require.ErrorIs(t, inTx(t, db, func(tx pgx.Tx) error { return l.Release(ctx, tx, failed) }), ledger.ErrAlreadyPosted,
		"compensation runs once")
	b, _ = ledger.Balance(ctx, db.Pool, "u1", "usd")
	require.EqualValues(t, 600, b)

	// The PSP takes part of the paid one back, then the whole: each part
	// once, the whole never more than the payout.
	returned := func(total int64) int64 {
		var part int64
		require.NoError(t, inTx(t, db, func(tx pgx.Tx) (err error) {
			part, err = l.Return(ctx, tx, paid, total)
			return err
		}))
		return part
	}
	require.EqualValues(t, 100, returned(100))
	require.EqualValues(t, 0, returned(100), "the same total again gives nothing")
	require.EqualValues(t, 0, returned(50), "a smaller total, late, gives nothing")
	b, _ = ledger.Balance(ctx, db.Pool, "u1", "usd")
	require.EqualValues(t, 700, b)
	require.EqualValues(t, 300, returned(400), "the rest gives the rest")
	require.EqualValues(t, 0, returned(400))
	require.Error(t, inTx(t, db, func(tx pgx.Tx) error { _, err := l.Return(ctx, tx, paid, 401); return err }),
		"more than the payout is refused")
	b, _ = ledger.Balance(ctx, db.Pool, "u1", "usd")
	require.EqualValues(t, 1000, b)
	reconcile(t, db)
}

func TestTheDatabaseRefusesBrokenMoney(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	l := ledger.New(db.Pool)
	require.NoError(t, inTx(t, db, func(tx pgx.Tx) error {
		return l.Credit(ctx, tx, ledger.Receipt{Provider: "stripe", Reference: "pi_1", UserID: "u1", Amount: 100, Currency: "usd"})
	}))

	// An unbalanced transaction fails at commit.
	err := inTx(t, db, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			WITH t AS (INSERT INTO ledger_transactions (kind, reference) VALUES ('bug', 'x') RETURNING id)
			INSERT INTO ledger_entries (transaction_id, wallet_id, amount, currency)
			SELECT t.id, w.id, 50, 'usd' FROM t, wallets w WHERE w.owner = 'u1'`)
		return err
	})
	require.ErrorContains(t, err, "does not sum to zero")

	_, err = db.Pool.Exec(ctx, `UPDATE wallets SET balance = -1 WHERE owner = 'u1'`)
	require.True(t, database.IsCheckViolation(err, "wallets_user_balance_non_negative"), "%v", err)
	_, err = db.Pool.Exec(ctx, `UPDATE ledger_entries SET amount = amount * 2`)
	require.ErrorContains(t, err, "append-only")
	_, err = db.Pool.Exec(ctx, `DELETE FROM wallets`)
	require.ErrorContains(t, err, "append-only")
	_, err = db.Pool.Exec(ctx, `UPDATE wallets SET balance = 5 WHERE kind = 'system'`)
	require.True(t, database.IsCheckViolation(err, "wallets_system_balance_derived"), "%v", err)
	reconcile(t, db)
}

// TestPostingsNeverNeedASecondConnection: more concurrent postings than
// pooled connections, on a ledger whose system accounts are not created
// yet, must not deadlock waiting for a connection to create them.
func TestPostingsNeverNeedASecondConnection(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t) // a pool of 6
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seed := ledger.New(db.Pool)
	require.NoError(t, inTx(t, db, func(tx pgx.Tx) error {
		return seed.Credit(ctx, tx, ledger.Receipt{Provider: "stripe", Reference: "pi_0", UserID: "u1", Amount: 10_000, Currency: "usd"})
	}))
	l := ledger.New(db.Pool) // a fresh ledger: nothing cached
	var wg sync.WaitGroup
	errs := make([]error, 12)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = database.InTx(ctx, db.Pool, func(tx pgx.Tx) error {
				return l.Hold(ctx, tx, ledger.Payout{ID: fmt.Sprint("p-", i), UserID: "u1", Provider: "stripe", Amount: 10, Currency: "usd"})
			})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err, "postings must not wait for a second connection")
	}
	reconcile(t, db)
}

// TestOverlappingWorkersCannotDoubleSpend: two workers that both believe they
// hold the wallet lock (a Redis lock lost to a pause) debit concurrently. The
// wallet row lock and balance check let only what the balance covers through.
func TestOverlappingWorkersCannotDoubleSpend(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	l := ledger.New(db.Pool)
	require.NoError(t, inTx(t, db, func(tx pgx.Tx) error {
		return l.Credit(ctx, tx, ledger.Receipt{Provider: "stripe", Reference: "pi_1", UserID: "u1", Amount: 1000, Currency: "usd"})
	}))

	const workers = 8
	var wg sync.WaitGroup
	results := make([]error, workers)
	start := make(chan struct{})
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = inTx(t, db, func(tx pgx.Tx) error {
				return l.Hold(ctx, tx, ledger.Payout{ID: fmt.Sprintf("p-%d", i), UserID: "u1", Provider: "stripe", Amount: 300, Currency: "usd"})
			})
		}()
	}
	close(start)
	wg.Wait()
	ok := 0
	for _, err := range results {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ledger.ErrInsufficientFunds):
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	require.Equal(t, 3, ok, "1000 covers exactly three holds of 300")
	b, _ := ledger.Balance(ctx, db.Pool, "u1", "usd")
	require.EqualValues(t, 100, b)
	reconcile(t, db)
}

// A credit writes no processed_events row: its ledger transaction, unique
// per payment, names the message and is its idempotency record. The same
// message again is a duplicate, another event about the payment changes
// nothing either, and neither writes a row.
func TestCreditOnceRecordsTheMessageInItsLedgerTransactionOnly(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	l := ledger.New(db.Pool)
	c := ledger.Claim{Group: "payout-worker", EventID: "stripe:evt_1"}
	out, err := l.CreditOnce(ctx, db.Pool, c, ledger.Receipt{Provider: "stripe", Reference: "pi_1", UserID: "u1", Amount: 700, Currency: "usd"})
	require.NoError(t, err)
	require.Equal(t, ledger.Credited, out)
	out, err = l.CreditOnce(ctx, db.Pool, c, ledger.Receipt{Provider: "stripe", Reference: "pi_1", UserID: "u1", Amount: 700, Currency: "usd"})
	require.NoError(t, err)
	require.Equal(t, ledger.DuplicateMessage, out)
	// charge.succeeded for the same payment: no money, nothing written.
	out, err = l.CreditOnce(ctx, db.Pool, ledger.Claim{Group: "payout-worker", EventID: "stripe:evt_2"}, ledger.Receipt{Provider: "stripe", Reference: "pi_1", UserID: "u1", Amount: 700, Currency: "usd"})
	require.NoError(t, err)
	require.Equal(t, ledger.AlreadyCredited, out)
	b, _ := ledger.Balance(ctx, db.Pool, "u1", "usd")
	require.EqualValues(t, 700, b)
	var processed int
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM processed_events").Scan(&processed))
	require.Zero(t, processed)
	var msg string
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT message_id FROM ledger_transactions WHERE kind = 'credit' AND reference = 'stripe:pi_1'").Scan(&msg))
	require.Equal(t, "stripe:evt_1", msg)
	reconcile(t, db)
}

// What processed_events records still holds for a credit: a message
// another path recorded as handled (refused with its dead letter, claimed
// by an earlier version) is not posted when it comes again; its replay,
// under the replay's own message id, is posted once; a replay of a credit
// that was posted changes nothing.
func TestCreditOnceKeepsHandledMessagesAndReplays(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	l := ledger.New(db.Pool)
	_, err := db.Pool.Exec(ctx, `INSERT INTO processed_events (consumer_group, event_id) VALUES ('payout-worker', 'stripe:evt_refused')`)
	require.NoError(t, err)
	receipt := ledger.Receipt{Provider: "stripe", Reference: "pi_r", UserID: "u1", Amount: 300, Currency: "usd"}

	out, err := l.CreditOnce(ctx, db.Pool, ledger.Claim{Group: "payout-worker", EventID: "stripe:evt_refused"}, receipt)
	require.NoError(t, err)
	require.Equal(t, ledger.DuplicateMessage, out, "a message handled before is not posted on redelivery")
	b, _ := ledger.Balance(ctx, db.Pool, "u1", "usd")
	require.Zero(t, b)

	replay := ledger.Claim{Group: "payout-worker", EventID: "stripe:evt_refused:replay:7:1"}
	out, err = l.CreditOnce(ctx, db.Pool, replay, receipt)
	require.NoError(t, err)
	require.Equal(t, ledger.Credited, out, "the operator's replay posts it")
	out, err = l.CreditOnce(ctx, db.Pool, replay, receipt)
	require.NoError(t, err)
	require.Equal(t, ledger.DuplicateMessage, out, "the replay redelivered")
	out, err = l.CreditOnce(ctx, db.Pool, ledger.Claim{Group: "payout-worker", EventID: "stripe:evt_refused:replay:8:1"}, receipt)
	require.NoError(t, err)
	require.Equal(t, ledger.AlreadyCredited, out, "a second letter's replay of a posted credit")
	b, _ = ledger.Balance(ctx, db.Pool, "u1", "usd")
	require.EqualValues(t, 300, b)
	var posted int
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM ledger_transactions WHERE kind = 'credit'").Scan(&posted))
	require.Equal(t, 1, posted)
	reconcile(t, db)
}

func TestConcurrentCreditsToOneWalletAllLand(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	l := ledger.New(db.Pool)
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.CreditOnce(ctx, db.Pool, ledger.Claim{Group: "g", EventID: fmt.Sprint("e", i)}, ledger.Receipt{Provider: "stripe", Reference: fmt.Sprint("pi_", i), UserID: "u1", Amount: 10, Currency: "usd"})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	b, _ := ledger.Balance(ctx, db.Pool, "u1", "usd")
	require.EqualValues(t, 200, b)
	reconcile(t, db)
}
