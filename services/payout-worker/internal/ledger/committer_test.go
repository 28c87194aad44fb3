package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
)

func startCommitter(t *testing.T, db *pgtest.DB, cfg ledger.CreditCommitterConfig) *ledger.CreditCommitter {
	t.Helper()
	c, err := ledger.NewCreditCommitter(ledger.New(db.Pool), db.Pool, cfg, lifecycle.Deps{})
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, c.Stop(context.Background())) })
	return c
}

// Many callers at once, two committers, small groups: every payment is
// credited exactly once however its messages race (each payment comes as
// two event ids, and each event is delivered twice), and the balances
// add up.
func TestCreditCommitterUnderConcurrency(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	c := startCommitter(t, db, ledger.CreditCommitterConfig{Workers: 2, MaxGroup: 8})
	ctx := context.Background()
	const payments, wallets = 120, 5
	type message struct {
		event, payment, user string
		amount               int64
	}
	var msgs []message
	var want int64
	for p := range payments {
		amount := int64(100 + p)
		want += amount
		user := fmt.Sprintf("u%d", p%wallets)
		for _, e := range []string{"pi", "ch"} {
			for range 2 {
				msgs = append(msgs, message{fmt.Sprintf("evt_%s_%d", e, p), fmt.Sprintf("pay_%d", p), user, amount})
			}
		}
	}
	var mu sync.Mutex
	outcomes := map[ledger.CreditOutcome]int{}
	var wg sync.WaitGroup
	next := make(chan message)
	for range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range next {
				out, err := c.Credit(ctx, ledger.Claim{Group: "g", EventID: m.event}, ledger.Receipt{Provider: "stripe", Reference: m.payment, UserID: m.user, Amount: m.amount, Currency: "usd"})
				if !assertNoError(t, err) {
					continue
				}
				mu.Lock()
				outcomes[out]++
				mu.Unlock()
			}
		}()
	}
	// Interleave so that deliveries of one payment race each other.
	for i := range 4 {
		for p := range payments {
			next <- msgs[p*4+i]
		}
	}
	close(next)
	wg.Wait()

	require.Equal(t, payments, outcomes[ledger.Credited])
	// The rest changed nothing. Only the posting message's redelivery can
	// be told a duplicate (its ledger transaction names it): the other
	// event's deliveries, and a redelivery that raced the posting (it waits
	// on the posting's row and reads with its own snapshot), are counted
	// already credited.
	require.Equal(t, 3*payments, outcomes[ledger.AlreadyCredited]+outcomes[ledger.DuplicateMessage])
	require.LessOrEqual(t, outcomes[ledger.DuplicateMessage], payments)
	var sum int64
	for w := range wallets {
		b, err := ledger.Balance(ctx, db.Pool, fmt.Sprintf("u%d", w), "usd")
		require.NoError(t, err)
		sum += b
	}
	require.Equal(t, want, sum)
	var txns, perPayment int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT reference) FROM ledger_transactions WHERE kind = 'credit'`).
		Scan(&txns, &perPayment))
	require.Equal(t, payments, txns, "one ledger transaction per payment")
	require.Equal(t, payments, perPayment)
	reconcile(t, db)
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("credit: %v", err)
		return false
	}
	return true
}

// A caller whose context ends while its group waits on a lock returns at
// once; its credit commits when the lock is released, and the redelivery
// is a duplicate.
func TestCreditCallerCancellationReturnsPromptly(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	c := startCommitter(t, db, ledger.CreditCommitterConfig{Workers: 1})
	ctx := context.Background()
	_, err := c.Credit(ctx, ledger.Claim{Group: "g", EventID: "evt_0"}, ledger.Receipt{Provider: "stripe", Reference: "pi_0", UserID: "u1", Amount: 1, Currency: "usd"})
	require.NoError(t, err)

	blocker, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = blocker.Exec(ctx, `SELECT 1 FROM wallets WHERE kind = 'user' AND owner = 'u1' FOR UPDATE`)
	require.NoError(t, err)

	waitCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = c.Credit(waitCtx, ledger.Claim{Group: "g", EventID: "evt_1"}, ledger.Receipt{Provider: "stripe", Reference: "pi_1", UserID: "u1", Amount: 10, Currency: "usd"})
	// Returned with the wallet still locked: the caller did not wait for the commit.
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, blocker.Rollback(ctx))

	require.Eventually(t, func() bool {
		b, err := ledger.Balance(ctx, db.Pool, "u1", "usd")
		return err == nil && b == 11
	}, 5*time.Second, 20*time.Millisecond, "the abandoned credit still commits")
	out, err := c.Credit(ctx, ledger.Claim{Group: "g", EventID: "evt_1"}, ledger.Receipt{Provider: "stripe", Reference: "pi_1", UserID: "u1", Amount: 10, Currency: "usd"})
	require.NoError(t, err)
	require.Equal(t, ledger.DuplicateMessage, out)
}

// Stop is idempotent, and a credit offered after it is refused.
func TestCreditCommitterStops(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	c, err := ledger.NewCreditCommitter(ledger.New(db.Pool), db.Pool, ledger.CreditCommitterConfig{Workers: 2}, lifecycle.Deps{})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.Stop(ctx), "a Stop before Start is harmless")
	c, err = ledger.NewCreditCommitter(ledger.New(db.Pool), db.Pool, ledger.CreditCommitterConfig{Workers: 2}, lifecycle.Deps{})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	out, err := c.Credit(ctx, ledger.Claim{Group: "g", EventID: "evt_1"}, ledger.Receipt{Provider: "stripe", Reference: "pi_1", UserID: "u1", Amount: 5, Currency: "usd"})
	require.NoError(t, err)
	require.Equal(t, ledger.Credited, out)
	require.NoError(t, c.Stop(ctx))
	require.NoError(t, c.Stop(ctx))
	_, err = c.Credit(ctx, ledger.Claim{Group: "g", EventID: "evt_2"}, ledger.Receipt{Provider: "stripe", Reference: "pi_2", UserID: "u1", Amount: 5, Currency: "usd"})
	require.ErrorIs(t, err, ledger.ErrCommitterStopped)
	b, err := ledger.Balance(ctx, db.Pool, "u1", "usd")
	require.NoError(t, err)
	require.EqualValues(t, 5, b)
}
