package handler_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
)

// testDeadlines are the production defaults (run.go).
var testDeadlines = payout.Deadlines{Initialized: 30 * time.Minute, Sending: 15 * time.Minute, Retrying: 30 * time.Minute,
	Pending: 240 * time.Hour, Review: 24 * time.Hour}

var sweepCfg = payout.SweepConfig{After: 10 * time.Minute, Every: time.Minute, Batch: 50, Deadlines: testDeadlines}

// awaiting takes a funded wallet's payout of 1500 to AWAITING_RESPONSE,
// where the PSP holds it pending.
func (w *world) awaiting(destination string) (pid, ref string) {
	w.t.Helper()
	w.fundWallet(5000)
	pid = w.createPayout(1500, destination, "stripe")
	w.requestPayout(pid, 1500, "stripe")
	p := w.waitStatus(pid, payout.Awaiting)
	w.waitProcessed("payout:" + pid + ":request")
	require.EqualValues(w.t, 3500, w.balance())
	return pid, p.Reference
}

func (w *world) sweep() map[string]int {
	w.t.Helper()
	done, err := w.proc.Sweep(context.Background(), sweepCfg)
	require.NoError(w.t, err)
	return done
}

// The PSP paid the payout and its payout.paid webhook never came: once the
// payout has waited past PAYOUT_CHECK_AFTER the sweeper looks it up and
// settles it from the PSP's record, once.
func TestPayoutWhoseWebhookNeverComesIsSettledFromThePSPsRecord(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	pid, ref := w.awaiting("ba_123")
	w.psp.Settle(t, ref, "paid") // the stand-in has no webhook URL here: the event is lost

	require.Empty(t, w.sweep(), "not looked up before it has waited PAYOUT_CHECK_AFTER")
	require.Equal(t, payout.Awaiting, w.payout(pid).Status)

	w.clock.advance(sweepCfg.After + time.Second)
	require.Equal(t, map[string]int{payout.SweptPaid: 1}, w.sweep())
	require.Equal(t, payout.Succeeded, w.payout(pid).Status)
	require.EqualValues(t, 1, w.pspCalls("stripe", "find", "ok"), "the sweeper's lookup was timed")
	require.EqualValues(t, 3500, w.balance())
	require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_settle' AND reference = $1`, pid))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM transaction_outbox WHERE topic = 'aegis.settlements' AND event_type = 'payout.succeeded'`))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM payout_evidence WHERE payout_id = $1 AND event_type = 'lookup' AND verdict = 'applied'`, pid))

	w.clock.advance(sweepCfg.After + time.Second)
	require.Empty(t, w.sweep(), "a finished payout is not looked up again")

	// An older event arriving after the lookup (a failure notice dated
	// before the PSP's record said paid) is stale: no money moves back.
	w.pspOutcome("evt_old_"+pid, pid, event.ActionPayoutFailed, time.Now().Add(-time.Minute))
	w.waitProcessed("stripe:evt_old_" + pid)
	require.Equal(t, payout.Succeeded, w.payout(pid).Status)
	require.Equal(t, 1, w.count(`SELECT count(*) FROM payout_evidence WHERE payout_id = $1 AND event_type = 'payout.failed' AND verdict = 'stale'`, pid))
	require.Zero(t, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_return' AND reference = $1`, pid))

	// The paid webhook, late after all, changes nothing.
	w.pspOutcome("evt_late_"+pid, pid, event.ActionPayoutPaid, time.Now().Add(time.Hour))
	w.waitProcessed("stripe:evt_late_" + pid)
	require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_settle' AND reference = $1`, pid))
}

// Failed (or canceled) at the PSP with no webhook: the hold comes back,
// once, and the payout is finished.
func TestPayoutFailedAtThePSPWithoutAWebhookIsReleasedByTheSweeper(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	pid, ref := w.awaiting("ba_123")
	w.psp.Settle(t, ref, "failed")
	w.clock.advance(sweepCfg.After + time.Second)
	require.Equal(t, map[string]int{payout.SweptFailed: 1}, w.sweep())
	p := w.payout(pid)
	require.Equal(t, payout.Finalized, p.Status)
	require.Contains(t, p.LastError, "stripe lookup: failed")
	require.EqualValues(t, 5000, w.balance())
	require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_release' AND reference = $1`, pid))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM transaction_outbox WHERE topic = 'aegis.settlements' AND event_type = 'payout.failed'`))
}

// Still pending at the PSP: nothing moves, the lookup is recorded and the
// payout is looked up again only after another PAYOUT_CHECK_AFTER. A
// lookup that fails decides nothing and is tried again at the next sweep.
func TestPendingOrUnanswerableLookupsMoveNoMoney(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	pid, _ := w.awaiting("ba_123")
	w.clock.advance(sweepCfg.After + time.Second)
	require.Equal(t, map[string]int{payout.SweptPending: 1}, w.sweep())
	require.Empty(t, w.sweep(), "looked up again only after PAYOUT_CHECK_AFTER")

	w.clock.advance(sweepCfg.After + time.Second)
	w.pspProxy.failLookups.Store(true)
	require.Equal(t, map[string]int{payout.SweptUnknown: 1}, w.sweep())
	require.Equal(t, map[string]int{payout.SweptUnknown: 1}, w.sweep(), "a failed lookup does not wait PAYOUT_CHECK_AFTER")
	require.Equal(t, payout.Awaiting, w.payout(pid).Status)
	require.EqualValues(t, 3500, w.balance(), "the hold stays")
	require.Equal(t, 3, w.count(`SELECT count(*) FROM payout_attempts WHERE payout_id = $1 AND kind = 'lookup'`, pid))
	require.Zero(t, w.count(`SELECT count(*) FROM ledger_transactions WHERE reference = $1 AND kind IN ('payout_settle', 'payout_release')`, pid))
}

// The PSP accepted the payout and now has no object for it: nobody can say
// whether the money left, so the hold is kept and a person is asked.
func TestPayoutThePSPNoLongerKnowsNeedsReview(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	pid, _ := w.awaiting("ba_123")
	req, err := http.NewRequest(http.MethodDelete, w.psp.URL+"/_psp/state", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()

	w.clock.advance(sweepCfg.After + time.Second)
	require.Equal(t, map[string]int{payout.SweptReview: 1}, w.sweep())
	p := w.payout(pid)
	require.Equal(t, payout.NeedsReview, p.Status)
	require.Equal(t, string(payout.ClassPSPMissing), p.Class)
	require.EqualValues(t, 3500, w.balance(), "the hold stays until a person resolves it")
	letters := w.deadLetters("aegis.transactions")
	require.Len(t, letters, 1, "ops find it with the other dead letters")
	require.Equal(t, string(payout.ClassPSPMissing), letters[0]["error_class"])
	require.Equal(t, "payout.requested", letters[0]["event_type"])
	// In dead_letters with the parked payout, not staged for Kafka: a
	// sweeper's letter has no origin offset, so a second publish of it (the
	// relay delivers at least once) would be stored as a second letter.
	require.Equal(t, 1, w.count(`SELECT count(*) FROM dead_letters WHERE source = 'sweeper' AND status = 'open'
		AND convert_from(payload, 'UTF8')::jsonb->>'payout_id' = $1`, pid))
	require.Zero(t, w.count(`SELECT count(*) FROM transaction_outbox WHERE topic = 'aegis.transactions.dlq'`))
	// One page for the stuck payout: dlq-admin's when it stores the letter;
	// the sweeper only counts it.
	require.Eventually(t, func() bool { return w.deadLettersCounted("aegis.transactions", string(payout.ClassPSPMissing)) == 1.0 }, 10*time.Second, 20*time.Millisecond)
	require.False(t, w.hasAlert(pid) || w.pagedForDeadLetters(), "the sweeper does not page; dlq-admin does, once")
}

// One sweeper at a time across replicas: while another holds the lock, a
// sweep does nothing.
func TestOnlyOneSweeperRunsAtATime(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	pid, ref := w.awaiting("ba_123")
	w.psp.Settle(t, ref, "paid")
	w.clock.advance(sweepCfg.After + time.Second)

	ctx := context.Background()
	other, err := w.db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer other.Release()
	_, err = other.Exec(ctx, `SELECT pg_advisory_lock(hashtext('aegis:payout-sweeper'))`)
	require.NoError(t, err)
	require.Empty(t, w.sweep())
	require.Equal(t, payout.Awaiting, w.payout(pid).Status)

	_, err = other.Exec(ctx, `SELECT pg_advisory_unlock(hashtext('aegis:payout-sweeper'))`)
	require.NoError(t, err)
	require.Equal(t, map[string]int{payout.SweptPaid: 1}, w.sweep())
}

// A payout its client canceled before the worker took it up (webhook-api
// moves it INITIALIZED → FAILED → FINALIZED under the row lock) is left
// alone when its command arrives: no hold, no PSP call.
func TestCanceledPayoutsCommandMovesNoMoney(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	pid := w.createPayout(1500, "ba_123", "stripe")
	_, err := w.db.Pool.Exec(context.Background(), `UPDATE payouts SET status = 'FINALIZED', error_class = 'canceled' WHERE id = $1`, pid)
	require.NoError(t, err)
	w.requestPayout(pid, 1500, "stripe")
	w.waitProcessed("payout:" + pid + ":request")
	require.Equal(t, payout.Finalized, w.payout(pid).Status)
	require.EqualValues(t, 5000, w.balance())
	require.Empty(t, w.psp.Objects(t, pid))
	require.Zero(t, w.count(`SELECT count(*) FROM ledger_transactions WHERE reference = $1`, pid))
}
