package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/psptest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/psp"
)

// The double-pay race: the first create is still executing at the PSP
// (slow, its answer lost to our timeout) when the next attempt looks the
// payout up. Finding nothing proves nothing until the settle window has
// passed since that request was sent: the payout is neither sent again
// under a new key (a second payout) nor, after a refusal, given its hold
// back (paid after release). It waits, is looked up again and the slow
// request's payout adopted. Waiting spends no attempt.
func TestSlowCreateWhoseAnswerWasLostIsNeverPaidTwice(t *testing.T) {
	t.Parallel()
	for name, next := range map[string][]psptest.Fault{
		"a new key would create a second payout": {{Kind: "slow_create", Count: 1}},
		"a refusal would release the hold":       {{Kind: "slow_create", Count: 1}, {Kind: "invalid_account", Count: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := setup(t, options{maxAttempts: 2, callTimeout: 300 * time.Millisecond, settleWindow: time.Minute})
			w.fundWallet(5000)
			w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Timeout: "2s", Next: next})
			pid := w.createPayout(900, "ba_1", "stripe")
			w.requestPayout(pid, 900, "stripe")
			w.waitStatus(pid, payout.Retrying)
			require.Empty(t, w.psp.Objects(t, pid), "the create has not executed yet")

			// The next attempt, while the PSP is still executing the first.
			w.relay(kafkax.TopicTransactions)
			require.Eventually(t, func() bool { return len(w.attempts(pid)) >= 2 }, 20*time.Second, 20*time.Millisecond)
			require.Equal(t, []string{"create:unknown", "lookup:not_found"}, w.attempts(pid), "nothing sent under a new key")
			p := w.payout(pid)
			require.Equal(t, payout.Retrying, p.Status, "%+v", p)
			require.Equal(t, string(payout.ClassSettling), p.Class)
			require.Equal(t, 1, p.Attempts, "waiting for the PSP spends no attempt")
			require.EqualValues(t, 4100, w.balance(), "the hold is kept")

			// The slow create lands; the payout is looked up again and adopts it.
			require.Eventually(t, func() bool { return len(w.psp.Objects(t, pid)) == 1 }, 10*time.Second, 20*time.Millisecond)
			w.relay(kafkax.TopicTransactions)
			p = w.waitStatus(pid, payout.Awaiting)
			objs := w.psp.Objects(t, pid)
			require.Len(t, objs, 1)
			require.Equal(t, objs[0].ID, p.Reference)
			require.Equal(t, psp.IdempotencyKey(pid), objs[0].IdempotencyKey)
			require.Equal(t, []string{"create:unknown", "lookup:not_found", "lookup:found"}, w.attempts(pid))
			creates := 0
			for _, c := range w.psp.Calls(t) {
				if c.PayoutID == pid && c.Method == "POST" {
					creates++
				}
			}
			require.Equal(t, 1, creates, "one create at the PSP")

			w.pspOutcome("evt_slow_paid", pid, event.ActionPayoutPaid, time.Now())
			w.waitStatus(pid, payout.Succeeded)
			require.EqualValues(t, 4100, w.balance(), "the wallet is debited once")
			require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_hold' AND reference = $1`, pid))
			require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_settle' AND reference = $1`, pid))
			require.Zero(t, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_release' AND reference = $1`, pid))
		})
	}
}

// Once the settle window has passed since the last request whose outcome
// is unknown, a lookup that finds nothing does prove that the PSP has no
// payout: the next attempt sends under a new key at once.
func TestAbsenceCountsOnceTheSettleWindowHasPassed(t *testing.T) {
	t.Parallel()
	w := setup(t, options{maxAttempts: 3, callTimeout: 300 * time.Millisecond, settleWindow: time.Minute})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Timeout: "3s", Next: []psptest.Fault{{Kind: "timeout", Count: 1}}})
	pid := w.createPayout(700, "ba_1", "stripe")
	w.requestPayout(pid, 700, "stripe")
	w.waitStatus(pid, payout.Retrying)

	w.relay(kafkax.TopicTransactions) // too early: deferred
	require.Eventually(t, func() bool { return len(w.attempts(pid)) >= 2 }, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, string(payout.ClassSettling), w.payout(pid).Class)

	w.passSettleWindow()
	w.relay(kafkax.TopicTransactions)
	p := w.waitStatus(pid, payout.Awaiting)
	require.Equal(t, []string{"create:unknown", "lookup:not_found", "lookup:not_found", "create:accepted"}, w.attempts(pid))
	require.Equal(t, 2, p.Attempts)
	objs := w.psp.Objects(t, pid)
	require.Len(t, objs, 1)
	require.Equal(t, psp.AttemptKey(pid, 1), objs[0].IdempotencyKey)
}

// The release path is held to the window too, whatever led to it: a
// refusal right after an unknown outcome, with a lookup that finds nothing
// before the window has passed, keeps the hold and is looked up again
// later; it neither releases nor ends the payout. (Here the lookup before
// the retry is skipped by hand, which the worker itself never does.)
func TestRefusalDoesNotReleaseBeforeTheSettleWindow(t *testing.T) {
	t.Parallel()
	w := setup(t, options{maxAttempts: 3, callTimeout: 300 * time.Millisecond, settleWindow: time.Minute})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Timeout: "3s", Next: []psptest.Fault{
		{Kind: "timeout", Count: 1}, {Kind: "invalid_account", Count: 1}}})
	pid := w.createPayout(700, "ba_1", "stripe")
	w.requestPayout(pid, 700, "stripe")
	w.waitStatus(pid, payout.Retrying)
	_, err := w.db.Pool.Exec(context.Background(), `UPDATE payouts SET lookup_needed = false WHERE id = $1`, pid)
	require.NoError(t, err)

	w.relay(kafkax.TopicTransactions)
	require.Eventually(t, func() bool { return len(w.attempts(pid)) >= 3 }, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, []string{"create:unknown", "create:refused", "lookup:not_found"}, w.attempts(pid))
	p := w.payout(pid)
	require.Equal(t, payout.Retrying, p.Status, "%+v", p)
	require.Equal(t, string(payout.ClassSettling), p.Class)
	require.EqualValues(t, 4300, w.balance(), "the hold is kept")
	require.Zero(t, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_release' AND reference = $1`, pid))

	// After the window the absence counts: sent again under a new key.
	w.passSettleWindow()
	w.relay(kafkax.TopicTransactions)
	p = w.waitStatus(pid, payout.Awaiting)
	require.Equal(t, []string{"create:unknown", "create:refused", "lookup:not_found", "lookup:not_found", "create:accepted"}, w.attempts(pid))
	objs := w.psp.Objects(t, pid)
	require.Len(t, objs, 1)
	require.Equal(t, psp.AttemptKey(pid, 1), objs[0].IdempotencyKey)
	require.EqualValues(t, 4300, w.balance())
}
