package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// TestAKeyIsClaimedWhileAnotherKeysBatchSettles is the latency path: a
// batch that was not full is settled while the loop claims and publishes the
// next, so a new row does not wait for the previous batch's settle. The
// settle of key "slow" is held by a trigger on this test's database that
// waits for an advisory lock the test holds (a lock, not a sleep: on a busy
// machine the rest of the pipeline may take longer than any fixed delay). While it is held, a row of another key goes out, and the next
// row of "slow" does not (its key's first row is still processing); once the
// settle commits, that row goes out without waiting for the poll (ten
// minutes here), and after the first on Kafka.
func TestAKeyIsClaimedWhileAnotherKeysBatchSettles(t *testing.T) {
	t.Parallel()
	claimBesideSettle(t, 1)
}

// With two loops (RELAY_WORKERS=2) the claim that skips "slow"'s next row
// may be the other loop's, which then sleeps: the settle wakes the relay
// when any claim of the process ran beside it.
func TestAKeyIsClaimedWhileAnotherKeysBatchSettlesTwoLoops(t *testing.T) {
	t.Parallel()
	claimBesideSettle(t, 2)
}

func claimBesideSettle(t *testing.T, loops int) {
	const holdKey = 7001 // the key slow_settle waits for
	b := setup(t)
	ctx := context.Background()
	hold, err := b.db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer func() { // before the relay stops (t.Cleanup), even when an assertion failed
		_, _ = hold.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
		hold.Release()
	}()
	_, err = hold.Exec(ctx, `SELECT pg_advisory_lock($1)`, holdKey)
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, `
		CREATE FUNCTION slow_settle() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock_shared(7001); RETURN OLD; END $$;
		CREATE TRIGGER slow_settle BEFORE DELETE ON transaction_outbox FOR EACH ROW
		WHEN (OLD.partition_key = 'user-slow') EXECUTE FUNCTION slow_settle();`)
	require.NoError(t, err)
	r, _ := b.newRelay(t, relayOpts{now: time.Now, poll: 10 * time.Minute})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, loops)
	for range loops {
		go func() { done <- r.Run(runCtx) }()
	}
	t.Cleanup(func() {
		cancel()
		for range loops {
			require.NoError(t, <-done)
		}
	})

	slow0 := b.insert(t, "user-slow", 0, 0)
	r.Wake()
	first := decode(t, kafkatest.ReadAll(t, b.cluster, kafkax.TopicWebhookPending, 1, 10*time.Second))
	require.Equal(t, payload{Key: "user-slow", N: 0}, first[0])

	// slow-0's settle is now held by the trigger.
	slow1 := b.insert(t, "user-slow", 1, 0)
	fast := b.insert(t, "user-fast", 0, 0)
	r.Wake()
	require.Eventually(t, func() bool { st, _ := b.status(t, fast); return st != "pending" }, 10*time.Second, 2*time.Millisecond,
		"the other key's row was never claimed")
	recs := decode(t, kafkatest.ReadAll(t, b.cluster, kafkax.TopicWebhookPending, 2, 10*time.Second))
	require.Contains(t, recs, payload{Key: "user-fast", N: 0})
	st, _ := b.status(t, slow0)
	require.Equal(t, "processing", st, "the other key's row waited for the first batch's settle")
	st, _ = b.status(t, slow1)
	require.Equal(t, "pending", st, "a key's next row is not claimed while its first is unsettled")

	// The settle ends; slow-1 follows at once, not at the next poll.
	_, err = hold.Exec(ctx, `SELECT pg_advisory_unlock($1)`, holdKey)
	require.NoError(t, err)
	for _, id := range []int64{slow0, slow1, fast} {
		require.Eventually(t, func() bool { st, _ := b.status(t, id); return st == published }, 10*time.Second, 5*time.Millisecond)
	}
	var order []payload
	for _, p := range decode(t, kafkatest.ReadAll(t, b.cluster, kafkax.TopicWebhookPending, 3, 10*time.Second)) {
		if p.Key == "user-slow" {
			order = append(order, p)
		}
	}
	require.Equal(t, []payload{{Key: "user-slow", N: 0}, {Key: "user-slow", N: 1}}, order)
}
