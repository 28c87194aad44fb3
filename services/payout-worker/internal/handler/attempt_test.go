package handler_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/psptest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
)

// A worker stopped inside its PSP call never records the answer: the PSP
// paid, the payout stays in SENDING_TO_GATEWAY and its command is
// redelivered, here more than a day later, when the PSP has forgotten the
// Idempotency-Key. The create was committed before it was sent, so the
// resume knows a call was made and may have executed: past the idempotency
// window it looks the payout up and adopts the PSP's object instead of
// sending it again under a key the PSP no longer knows (a second payout).
func TestCallWhoseAnswerWasNeverRecordedIsLookedUpAfterTheIdempotencyWindow(t *testing.T) {
	t.Parallel()
	w, pid, p := resumeAfterTheIdempotencyWindow(t)
	objs := w.psp.Objects(t, pid)
	require.Len(t, objs, 1, "one payout at the PSP, not two")
	require.Equal(t, payout.Awaiting, p.Status, "%+v", p)
	require.Equal(t, objs[0].ID, p.Reference, "the PSP's object is adopted")
	require.Equal(t, []string{"create:unknown", "lookup:found"}, w.attempts(pid),
		"the unanswered create is in the history as unknown, then the lookup")
	var unknown bool
	require.NoError(t, w.db.Pool.QueryRow(context.Background(),
		`SELECT outcome_unknown FROM payouts WHERE id = $1`, pid).Scan(&unknown))
	require.True(t, unknown, "the unanswered create may have executed")
	require.EqualValues(t, 4300, w.balance(), "the wallet is debited once")
}

// resumeAfterTheIdempotencyWindow pays a payout through a call whose answer
// is never recorded, then resumes it 25 hours later, when the PSP has
// forgotten its key; it returns the payout once it has moved on.
func resumeAfterTheIdempotencyWindow(t *testing.T) (*world, string, payoutRow) {
	t.Helper()
	// The stand-in forgets a key as soon as its request is done; the
	// worker's window is the default 23h. The call timeout outlasts the
	// consumer's grace, so the shutdown, not a timeout, ends the call.
	w := setup(t, options{callTimeout: 30 * time.Second, grace: 100 * time.Millisecond,
		pspEnv: map[string]string{"PSP_IDEMPOTENCY_WINDOW": "1ms"}})
	w.fundWallet(5000)
	w.pspProxy.swallowCreates.Store(1)
	pid := w.createPayout(700, "ba_1", "stripe")
	w.requestPayout(pid, 700, "stripe")
	<-w.pspProxy.swallowed
	require.Len(t, w.psp.Objects(t, pid), 1, "the PSP executed the create")

	// The worker is killed inside the call: nothing after it is recorded.
	w.stopConsumers()
	require.Equal(t, payout.Sending, w.payout(pid).Status)
	require.EqualValues(t, 4300, w.balance(), "the hold was taken before the call")

	// Back a day and more later.
	w.clock.advance(25 * time.Hour)
	w.startConsumer()
	return w, pid, w.waitStatus(pid, payout.Awaiting, payout.NeedsReview, payout.Failed, payout.Finalized)
}

// The create of a first attempt is recorded in the transaction that takes
// the hold: once it is on the wire its key and send time are committed.
// Here the worker is stopped after that commit and before its request
// reached the PSP. The resume treats the create as an unknown outcome:
// within the idempotency window it is sent again under the same key; past
// it the payout is looked up first, found absent, and sent under a new key.
// Either way the PSP has one payout and the wallet is debited once.
func TestCreateCommittedButNeverSentIsPaidOnceWhenResumed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		after   time.Duration
		history []string
		newKey  bool
	}{
		{name: "within the idempotency window", after: 0,
			history: []string{"create:unknown", "create:accepted"}},
		{name: "past the idempotency window", after: 25 * time.Hour,
			history: []string{"create:unknown", "lookup:not_found", "create:accepted"}, newKey: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := setup(t, options{callTimeout: 30 * time.Second, grace: 100 * time.Millisecond})
			w.fundWallet(5000)
			w.pspProxy.dropCreates.Store(1)
			pid := w.createPayout(700, "ba_1", "stripe")
			w.requestPayout(pid, 700, "stripe")
			key := <-w.pspProxy.dropped

			// The request is on the wire: what it goes out under is on disk.
			require.Equal(t, []string{"create:sending"}, w.attempts(pid))
			require.Equal(t, []string{key}, w.createKeys(pid), "the key on the wire is the committed one")
			var sending, first bool
			require.NoError(t, w.db.Pool.QueryRow(context.Background(),
				`SELECT sending_at IS NOT NULL, first_attempt_at IS NOT NULL FROM payouts WHERE id = $1`, pid).
				Scan(&sending, &first))
			require.True(t, sending && first, "sending_at and first_attempt_at are committed before the call")
			require.Equal(t, payout.Sending, w.payout(pid).Status)
			require.EqualValues(t, 4300, w.balance(), "the hold was taken with it")

			// The worker is stopped before the request gets through.
			w.stopConsumers()
			require.Empty(t, w.psp.Objects(t, pid), "the PSP never got the create")

			w.clock.advance(tc.after)
			w.startConsumer()
			p := w.waitStatus(pid, payout.Awaiting, payout.Succeeded, payout.NeedsReview, payout.Failed, payout.Finalized)
			require.Contains(t, []payout.Status{payout.Awaiting, payout.Succeeded}, p.Status, "%+v", p)
			objs := w.psp.Objects(t, pid)
			require.Len(t, objs, 1, "paid once")
			require.Equal(t, objs[0].ID, p.Reference)
			require.Equal(t, tc.history, w.attempts(pid))
			keys := w.createKeys(pid)
			require.Len(t, keys, 2)
			require.Equal(t, key, keys[0])
			if tc.newKey {
				require.NotEqual(t, key, keys[1], "past the window, a new key after the PSP confirmed it has nothing")
			} else {
				require.Equal(t, key, keys[1], "within the window, the same key")
			}
			require.EqualValues(t, 4300, w.balance(), "the wallet is debited once")
		})
	}
}

// createKeys is the Idempotency-Key of each create recorded for the payout,
// in the order they were sent.
func (w *world) createKeys(pid string) []string {
	w.t.Helper()
	rows, err := w.db.Pool.Query(context.Background(),
		`SELECT coalesce(idempotency_key, '') FROM payout_attempts WHERE payout_id = $1 AND kind = 'create' ORDER BY id`, pid)
	require.NoError(w.t, err)
	var out []string
	for rows.Next() {
		var k string
		require.NoError(w.t, rows.Scan(&k))
		out = append(out, k)
	}
	require.NoError(w.t, rows.Err())
	return out
}

// A 503 is no promise that nothing happened: on the last attempt the hold
// is kept and a person asked, never given back.
func TestA503OnTheLastAttemptKeepsTheHold(t *testing.T) {
	t.Parallel()
	w := setup(t, options{maxAttempts: 1})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", ErrorStatus: 503, Next: []psptest.Fault{{Kind: "5xx", Count: 1}}})
	pid := w.createPayout(800, "ba_1", "stripe")
	w.requestPayout(pid, 800, "stripe")
	p := w.waitStatus(pid, payout.NeedsReview, payout.Finalized)
	require.Equal(t, payout.NeedsReview, p.Status, "%+v", p)
	require.EqualValues(t, 4200, w.balance(), "the hold is kept")
	require.Zero(t, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_release' AND reference = $1`, pid))
	require.Equal(t, []string{"create:unknown"}, w.attempts(pid))
	require.Len(t, w.deadLetters(kafkax.TopicTransactions), 1, "a person is asked")
}

// A Paystack transfer that waits for an OTP is neither paid nor failed: the
// payout keeps its hold and goes to NEEDS_REVIEW with its own class, one
// dead letter (one page). Once the OTP is entered at Paystack, the
// operator's replay looks the transfer up and moves on from what it says.
func TestPaystackTransferWaitingForAnOTPKeepsTheHoldAndAsksAPersonOnce(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	otp := "otp"
	w.pspProxy.paystackStatus.Store(&otp)
	pid := w.createPayout(900, "RCP_ok", "paystack")
	w.requestPayout(pid, 900, "paystack")
	p := w.waitStatus(pid, payout.NeedsReview, payout.Awaiting, payout.Succeeded, payout.Finalized)
	require.Equal(t, payout.NeedsReview, p.Status, "%+v", p)
	require.Equal(t, "psp_otp_required", p.Class)
	require.EqualValues(t, 4100, w.balance(), "the hold is kept")
	var pspStatus string
	require.NoError(t, w.db.Pool.QueryRow(context.Background(),
		`SELECT coalesce(psp_status, '') FROM payouts WHERE id = $1`, pid).Scan(&pspStatus))
	require.Equal(t, "otp", pspStatus)
	letters := w.deadLetters(kafkax.TopicTransactions)
	require.Len(t, letters, 1, "one page")
	require.Equal(t, "psp_otp_required", letters[0][dlq.HeaderErrorClass])

	// The OTP is entered at Paystack; the operator replays the letter.
	w.pspProxy.paystackStatus.Store(nil)
	b, _ := json.Marshal(event.PayoutRequested{PayoutID: pid, UserID: w.user, Amount: 900, Currency: "usd", Provider: "paystack"})
	w.produce(kafkax.TopicTransactions, w.user, "payout:"+pid+":request:replay:1:1", b)
	p = w.waitStatus(pid, payout.Awaiting, payout.Succeeded)
	objs := w.psp.Objects(t, pid)
	require.Len(t, objs, 1, "the replay adopted the transfer, it did not send another")
	require.Equal(t, objs[0].ID, p.Reference)
	require.Equal(t, []string{"create:accepted", "lookup:found"}, w.attempts(pid))
	require.EqualValues(t, 4100, w.balance())
}

// A Paystack transfer the sweeper finds waiting for an OTP (or in a status
// Paystack does not document) is not left pending for ever: NEEDS_REVIEW
// with its class, hold kept, one dead letter; the next sweep leaves it to
// the person.
func TestSweptPaystackTransferWaitingForAPersonNeedsReview(t *testing.T) {
	t.Parallel()
	for status, class := range map[string]string{"otp": "psp_otp_required", "queued_for_review": "psp_status_unmapped"} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			w := setup(t, options{})
			w.fundWallet(5000)
			pid := w.createPayout(1500, "RCP_ok", "paystack")
			w.requestPayout(pid, 1500, "paystack")
			w.waitStatus(pid, payout.Awaiting)
			w.waitProcessed("payout:" + pid + ":request")

			w.pspProxy.paystackLookupStatus.Store(&status)
			w.clock.advance(sweepCfg.After + time.Second)
			require.Equal(t, map[string]int{payout.SweptReview: 1}, w.sweep())
			p := w.payout(pid)
			require.Equal(t, payout.NeedsReview, p.Status)
			require.Equal(t, class, p.Class)
			require.EqualValues(t, 3500, w.balance(), "the hold is kept")
			letters := w.deadLetters(kafkax.TopicTransactions)
			require.Len(t, letters, 1)
			require.Equal(t, class, letters[0][dlq.HeaderErrorClass])

			w.clock.advance(sweepCfg.After + time.Second)
			require.Empty(t, w.sweep(), "one page: NEEDS_REVIEW is the person's")
			require.Len(t, w.deadLetters(kafkax.TopicTransactions), 1)
		})
	}
}
