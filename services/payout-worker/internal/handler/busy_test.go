package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
)

// A payout command whose wallet another delivery holds (a retry of another
// of the user's payouts calling a slow PSP) is put back through the
// outbox, due a few seconds later, instead of being retried in place into
// a dead letter that pages for nothing; once the wallet is free the copy
// sends the payout.
func TestPayoutCommandWhoseWalletIsBusyIsDeferredNotDeadLettered(t *testing.T) {
	w := setup(t, options{})
	ctx := context.Background()
	w.fundWallet(5000)
	held, err := w.locks.Acquire(ctx, w.user)
	require.NoError(t, err)
	released := false
	defer func() {
		if !released {
			held.Release()
		}
	}()

	pid := w.createPayout(700, "ba_1", "stripe")
	w.requestPayout(pid, 700, "stripe")
	deferred := func() int {
		return w.count(`SELECT count(*) FROM transaction_outbox WHERE topic = $1 AND status = 'pending'
			AND payload->>'payout_id' = $2 AND headers->>'message_id' LIKE '%:busy:%' AND next_retry_at > created_at`,
			kafkax.TopicTransactions, pid)
	}
	require.Eventually(t, func() bool { return deferred() == 1 }, 30*time.Second, 50*time.Millisecond,
		"the command is deferred through the outbox")
	require.Zero(t, w.count(`SELECT count(*) FROM transaction_outbox WHERE topic = $1`,
		kafkax.DLQTopic(kafkax.TopicTransactions)), "waiting for a wallet writes no dead letter")
	require.Equal(t, payout.Initialized, w.payout(pid).Status, "nothing was held or sent without the wallet")

	held.Release()
	released = true
	require.Equal(t, 1, w.relay(kafkax.TopicTransactions))
	w.waitStatus(pid, payout.Awaiting)
	require.Equal(t, int64(5000-700), w.balance())
}
