package handler_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/psptest"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/psp"
)

// loseCommands marks the worker's pending commands on aegis.transactions
// as handled without publishing them: a retry row lost, dead-lettered by
// the relay or discarded. It returns how many it lost.
func (w *world) loseCommands() int {
	w.t.Helper()
	tag, err := w.db.Pool.Exec(context.Background(), `
		UPDATE transaction_outbox SET status = 'processed', processed_at = now(), finished_at = now()
		WHERE topic = $1 AND event_type = 'payout.requested' AND status = 'pending'`, kafkax.TopicTransactions)
	require.NoError(w.t, err)
	return int(tag.RowsAffected())
}

// pendingCommands counts the payout commands waiting in the outbox.
func (w *world) pendingCommands() int {
	w.t.Helper()
	return w.count(`SELECT count(*) FROM transaction_outbox WHERE topic = $1 AND event_type = 'payout.requested'
		AND status = 'pending'`, kafkax.TopicTransactions)
}

// gauge is the value of a payout metric with label state (0 if absent).
func (w *world) gauge(name string, state payout.Status) float64 {
	w.t.Helper()
	families, err := w.reg.Gather()
	require.NoError(w.t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" && l.GetValue() == string(state) {
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// deadlineActions is aegis_payout_deadline_escalations_total{state,action}.
func (w *world) deadlineActions(state payout.Status, action string) float64 {
	w.t.Helper()
	families, err := w.reg.Gather()
	require.NoError(w.t, err)
	for _, f := range families {
		if f.GetName() != "aegis_payout_deadline_escalations_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["state"] == string(state) && labels["action"] == action {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// sendingWithoutDelivery leaves a funded wallet's payout of amount as a
// delivery leaves it when it dies after its first transaction: the hold
// taken and the payout SENDING_TO_GATEWAY, with no command left to resume
// it (its message dead-lettered and discarded, or committed by a consumer
// that then lost its record).
func (w *world) sendingWithoutDelivery(amount int64) string {
	w.t.Helper()
	ctx := context.Background()
	w.fundWallet(5000)
	pid := w.createPayout(amount, "ba_123", "stripe")
	l := ledger.New(w.db.Pool)
	require.NoError(w.t, l.Prepare(ctx, "stripe", "usd"))
	require.NoError(w.t, database.InTx(ctx, w.db.Pool, func(tx pgx.Tx) error {
		if err := l.Hold(ctx, tx, ledger.Payout{ID: pid, UserID: w.user, Provider: "stripe", Amount: amount, Currency: "usd"}); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE payouts SET status = 'SENDING_TO_GATEWAY' WHERE id = $1`, pid)
		return err
	}))
	require.EqualValues(w.t, 5000-amount, w.balance())
	return pid
}

// An INITIALIZED payout whose command never reached the worker: left alone
// within its deadline, published again (once) past it, and then paid as
// any other. No hold was taken, so the duplicate cannot pay twice.
func TestInitializedPayoutWhoseCommandWasLostIsPublishedAgain(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	start := time.Now()
	pid := w.createPayout(700, "ba_123", "stripe") // its command is lost: never published

	w.clock.advance(testDeadlines.Initialized - time.Minute)
	require.Empty(t, w.sweep(), "left alone within its deadline")
	require.Zero(t, w.pendingCommands())
	age := w.gauge("aegis_payout_oldest_age_seconds", payout.Initialized)
	require.GreaterOrEqual(t, age, (testDeadlines.Initialized - time.Minute).Seconds())
	require.Less(t, age, (testDeadlines.Initialized - time.Minute + time.Since(start) + time.Second).Seconds())
	require.Zero(t, w.gauge("aegis_payout_overdue", payout.Initialized))

	w.clock.advance(2 * time.Minute)
	require.Equal(t, map[string]int{payout.DeadlineRepublished: 1}, w.sweep())
	require.Equal(t, payout.Initialized, w.payout(pid).Status)
	require.Equal(t, 1, w.pendingCommands())
	require.EqualValues(t, 1, w.deadlineActions(payout.Initialized, payout.DeadlineRepublished))
	require.Empty(t, w.sweep(), "published once, not at every sweep")

	require.Equal(t, 1, w.relay(kafkax.TopicTransactions))
	w.waitStatus(pid, payout.Awaiting)
	require.Len(t, w.psp.Objects(t, pid), 1)
	require.EqualValues(t, 4300, w.balance())
	require.Zero(t, w.sweep()[payout.DeadlineRepublished])
	require.Zero(t, w.gauge("aegis_payout_oldest_age_seconds", payout.Initialized))
}

// A SENDING_TO_GATEWAY payout whose delivery reached the PSP and never
// came back: past its deadline it is resumed through a retry that looks it
// up first and adopts the PSP's object. Nothing is sent twice.
func TestSendingPayoutWhoseDeliveryWasLostAdoptsWhatThePSPHas(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	pid := w.sendingWithoutDelivery(900)
	// The lost delivery's create executed at the PSP.
	client := psp.NewStripe(stripeapi.New("sk_test_aegis", w.psp.URL, &http.Client{}))
	_, err := client.CreatePayout(context.Background(), psp.Request{PayoutID: pid, Amount: 900, Currency: "usd",
		Destination: "ba_123", IdempotencyKey: psp.IdempotencyKey(pid)})
	require.NoError(t, err)

	w.clock.advance(testDeadlines.Sending - time.Minute)
	require.Empty(t, w.sweep(), "left alone within its deadline")
	require.Equal(t, payout.Sending, w.payout(pid).Status)

	w.clock.advance(2 * time.Minute)
	require.Equal(t, map[string]int{payout.DeadlineResumed: 1}, w.sweep())
	p := w.payout(pid)
	require.Equal(t, payout.Retrying, p.Status)
	require.Equal(t, string(payout.ClassDeadline), p.Class)
	require.EqualValues(t, 1, w.deadlineActions(payout.Sending, payout.DeadlineResumed))

	require.Equal(t, 1, w.relay(kafkax.TopicTransactions))
	p = w.waitStatus(pid, payout.Awaiting)
	objs := w.psp.Objects(t, pid)
	require.Len(t, objs, 1, "adopted, not sent again")
	require.Equal(t, objs[0].ID, p.Reference)
	require.Equal(t, []string{"lookup:found"}, w.attempts(pid))
	require.EqualValues(t, 4100, w.balance(), "the hold stays while the PSP pays")
}

// The same with nothing at the PSP: the payout is sent only once a lookup
// finds nothing after the settle window (a delivery that was lost may still
// be executing there), under a new key; its hold is never released on the
// way.
func TestSendingPayoutWithNothingAtThePSPIsSentOnceTheSettleWindowHasPassed(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	pid := w.sendingWithoutDelivery(900)
	w.clock.advance(testDeadlines.Sending + time.Minute)
	require.Equal(t, map[string]int{payout.DeadlineResumed: 1}, w.sweep())

	require.Equal(t, 1, w.relay(kafkax.TopicTransactions))
	require.Eventually(t, func() bool { return w.payout(pid).Class == string(payout.ClassSettling) }, 20*time.Second, 20*time.Millisecond,
		"nothing found yet proves nothing: deferred to the end of the settle window")
	require.Equal(t, payout.Retrying, w.payout(pid).Status)
	require.Equal(t, []string{"lookup:not_found"}, w.attempts(pid))
	require.Empty(t, w.psp.Objects(t, pid))
	require.EqualValues(t, 4100, w.balance())

	w.passSettleWindow()
	require.Equal(t, 1, w.relay(kafkax.TopicTransactions))
	w.waitStatus(pid, payout.Awaiting)
	objs := w.psp.Objects(t, pid)
	require.Len(t, objs, 1)
	require.Equal(t, psp.AttemptKey(pid, 1), objs[0].IdempotencyKey)
	require.Zero(t, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_release' AND reference = $1`, pid))
}

// A RETRYING payout whose retry row was lost: published again past its
// deadline; lost again, it goes to a person with its hold kept.
func TestRetryingPayoutWhoseRetryWasLostIsPublishedAgainThenEscalated(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", RetryAfterSeconds: 1, Next: []psptest.Fault{{Kind: "429", Count: 2}}})
	pid := w.createPayout(800, "ba_123", "stripe")
	w.requestPayout(pid, 800, "stripe")
	w.waitStatus(pid, payout.Retrying)
	w.waitProcessed("payout:" + pid + ":request")
	require.Equal(t, 1, w.loseCommands())

	w.clock.advance(testDeadlines.Retrying - time.Minute)
	require.Empty(t, w.sweep(), "left alone within its deadline")

	w.clock.advance(2 * time.Minute)
	require.Equal(t, map[string]int{payout.DeadlineRepublished: 1}, w.sweep())
	require.Equal(t, payout.Retrying, w.payout(pid).Status)
	require.Equal(t, 1, w.pendingCommands())
	require.Empty(t, w.sweep(), "published once per deadline")

	// The re-published retry meets the second 429 and is scheduled again:
	// a new RETRYING, a new deadline. Its retry row is lost as well.
	require.Equal(t, 1, w.relay(kafkax.TopicTransactions))
	require.Eventually(t, func() bool { return w.pendingCommands() == 1 }, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, payout.Retrying, w.payout(pid).Status)
	require.Equal(t, 1, w.loseCommands())
	w.clock.advance(testDeadlines.Retrying + time.Minute)
	require.Equal(t, map[string]int{payout.DeadlineEscalated: 1}, w.sweep())
	p := w.payout(pid)
	require.Equal(t, payout.NeedsReview, p.Status)
	require.Equal(t, string(payout.ClassDeadline), p.Class)
	require.EqualValues(t, 4200, w.balance(), "the hold stays until a person resolves it")
	require.Empty(t, w.psp.Objects(t, pid))
	letters := w.deadLetters(kafkax.TopicTransactions)
	require.Len(t, letters, 1)
	require.Equal(t, string(payout.ClassDeadline), letters[0]["error_class"])
	require.EqualValues(t, 1, w.deadlineActions(payout.Retrying, payout.DeadlineEscalated))
	require.Zero(t, w.count(`SELECT count(*) FROM ledger_transactions WHERE reference = $1 AND kind = 'payout_release'`, pid))
}

// A payout the PSP keeps pending is looked up every PAYOUT_CHECK_AFTER,
// and not for ever: past PAYOUT_PENDING_ESCALATE_AFTER in its state it goes
// to NEEDS_REVIEW with its hold kept. NEEDS_REVIEW has a deadline too: past
// it the payout shows as overdue; nothing moves on its own.
func TestPendingAtThePSPPastItsDeadlineIsEscalatedAndAnOverdueReviewShows(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	start := time.Now()
	pid, _ := w.awaiting("ba_123")

	w.clock.advance(testDeadlines.Pending - time.Hour)
	require.Equal(t, map[string]int{payout.SweptPending: 1}, w.sweep(), "within its deadline: looked up, left pending")
	require.Equal(t, payout.Awaiting, w.payout(pid).Status)
	age := w.gauge("aegis_payout_oldest_age_seconds", payout.Awaiting)
	require.GreaterOrEqual(t, age, (testDeadlines.Pending - time.Hour).Seconds())
	require.Less(t, age, (testDeadlines.Pending - time.Hour + time.Since(start) + time.Second).Seconds())

	w.clock.advance(2 * time.Hour)
	require.Equal(t, map[string]int{payout.DeadlineEscalated: 1}, w.sweep(),
		"past it: escalated at once, not after another PAYOUT_CHECK_AFTER")
	p := w.payout(pid)
	require.Equal(t, payout.NeedsReview, p.Status)
	require.Equal(t, string(payout.ClassDeadline), p.Class)
	require.EqualValues(t, 3500, w.balance(), "the hold stays")
	require.Len(t, w.deadLetters(kafkax.TopicTransactions), 1)
	require.EqualValues(t, 1, w.deadlineActions(payout.Awaiting, payout.DeadlineEscalated))
	require.Zero(t, w.gauge("aegis_payout_oldest_age_seconds", payout.Awaiting))

	// The database dated the escalation by its own clock: the processor's
	// is set back to it, so that the review's age is measured from there.
	w.clock.advance(-w.clock.offset())
	w.clock.advance(testDeadlines.Review - time.Hour)
	require.Empty(t, w.sweep())
	require.Zero(t, w.gauge("aegis_payout_overdue", payout.NeedsReview))
	w.clock.advance(2 * time.Hour)
	require.Empty(t, w.sweep(), "a person resolves it, not the sweeper")
	require.EqualValues(t, 1, w.gauge("aegis_payout_overdue", payout.NeedsReview))
	require.Greater(t, w.gauge("aegis_payout_oldest_age_seconds", payout.NeedsReview), testDeadlines.Review.Seconds())
	require.Equal(t, payout.NeedsReview, w.payout(pid).Status)
	require.EqualValues(t, 3500, w.balance())
}

// An INITIALIZED payout is published again once: lost a second time, it is
// left to the age alert (it holds no money; the client may cancel it)
// rather than published at every deadline.
func TestInitializedPayoutIsPublishedAgainOnlyOnce(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	pid := w.createPayout(700, "ba_123", "stripe")
	w.clock.advance(testDeadlines.Initialized + time.Minute)
	require.Equal(t, map[string]int{payout.DeadlineRepublished: 1}, w.sweep())
	require.Equal(t, 1, w.loseCommands())

	w.clock.advance(testDeadlines.Initialized + time.Minute)
	require.Empty(t, w.sweep())
	require.Zero(t, w.pendingCommands())
	require.Equal(t, payout.Initialized, w.payout(pid).Status)
	require.EqualValues(t, 1, w.gauge("aegis_payout_overdue", payout.Initialized), "visible as overdue")
	require.Greater(t, w.gauge("aegis_payout_oldest_age_seconds", payout.Initialized), 2*testDeadlines.Initialized.Seconds())
	require.EqualValues(t, 5000, w.balance(), "nothing held")
}

// A SENDING_TO_GATEWAY payout resumed once whose retry is lost as well
// goes to a person: NEEDS_REVIEW, the hold kept, its outcome still unknown
// (a replay or resolution must look it up at the PSP).
func TestSendingPayoutThatStallsAgainAfterItsResumeNeedsReview(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	pid := w.sendingWithoutDelivery(900)
	w.clock.advance(testDeadlines.Sending + time.Minute)
	require.Equal(t, map[string]int{payout.DeadlineResumed: 1}, w.sweep())
	require.Equal(t, 1, w.loseCommands())

	w.clock.advance(testDeadlines.Retrying + time.Minute)
	require.Equal(t, map[string]int{payout.DeadlineEscalated: 1}, w.sweep())
	p := w.payout(pid)
	require.Equal(t, payout.NeedsReview, p.Status)
	require.Equal(t, string(payout.ClassDeadline), p.Class)
	require.EqualValues(t, 4100, w.balance(), "the hold stays")
	require.Equal(t, 1, w.count(`SELECT count(*) FROM payouts WHERE id = $1 AND outcome_unknown AND lookup_needed`, pid))
	letters := w.deadLetters(kafkax.TopicTransactions)
	require.Len(t, letters, 1)
	require.Equal(t, string(payout.ClassDeadline), letters[0]["error_class"])
	require.Empty(t, w.psp.Objects(t, pid), "nothing sent on a guess")
	require.Zero(t, w.count(`SELECT count(*) FROM ledger_transactions WHERE reference = $1 AND kind = 'payout_release'`, pid))
}

// A PSP may ask for longer than the deadline (Retry-After): that retry is
// not published again before it was due and then had the same grace as any
// other, so a rate-limited payout is not sent early.
func TestRetryingPayoutOnALongRetryAfterIsNotPublishedAgainBeforeItIsDue(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", RetryAfterSeconds: 3600, Next: []psptest.Fault{{Kind: "429", Count: 1}}})
	pid := w.createPayout(800, "ba_123", "stripe")
	w.requestPayout(pid, 800, "stripe")
	w.waitStatus(pid, payout.Retrying)
	w.waitProcessed("payout:" + pid + ":request")

	w.clock.advance(testDeadlines.Retrying + time.Minute)
	require.Equal(t, map[string]int{payout.DeadlineNotDue: 1}, w.sweep())
	require.Equal(t, 1, w.pendingCommands(), "only its own scheduled retry")

	// Due at 60m; the grace after it is the deadline less the longest
	// wait we schedule ourselves (1m: the harness's backoff cap and settle
	// window), so it is acted on from 89m. Its retry row is lost.
	require.Equal(t, 1, w.loseCommands())
	w.clock.advance(57 * time.Minute) // 88m
	require.Equal(t, map[string]int{payout.DeadlineNotDue: 1}, w.sweep())
	w.clock.advance(2 * time.Minute) // 90m
	require.Equal(t, map[string]int{payout.DeadlineRepublished: 1}, w.sweep())
	require.Equal(t, 1, w.relay(kafkax.TopicTransactions))
	w.waitStatus(pid, payout.Awaiting)
	require.Len(t, w.psp.Objects(t, pid), 1)
}

// A lost INITIALIZED payout's command, published again by the sweeper, is
// the payout's first attempt (it takes the hold): it goes on the user's key
// like the original, behind a credit of the user accepted before it, and
// so finds that credit in the wallet. On the payout's own key it went out
// ahead of the credit and the payout failed for want of funds.
func TestInitializedPayoutPublishedAgainWaitsBehindItsUsersEarlierCredit(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	ctx := context.Background()

	// The user's credit, accepted and on its way, not published yet (the
	// relay cannot publish it before due).
	e := w.creditEvent("evt_before", "pi_before", 3_000)
	b, err := json.Marshal(e)
	require.NoError(t, err)
	due := time.Now().Add(testDeadlines.Initialized + time.Hour)
	creditID := w.outboxInsert(outbox.Message{Topic: kafkax.TopicWebhookPending, EventType: e.Type, PartitionKey: w.user,
		Payload: b, NotBefore: due, Headers: map[string]string{kafkax.HeaderMessageID: e.MessageID(),
			kafkax.HeaderEventType: e.Type, eventproof.Header: w.proof.Sign(e)}})
	pid := w.createPayout(700, "ba_123", "stripe") // its command is lost: never published

	w.clock.advance(testDeadlines.Initialized + time.Minute)
	require.Equal(t, map[string]int{payout.DeadlineRepublished: 1}, w.sweep())
	var cmdID int64
	var key string
	require.NoError(t, w.db.Pool.QueryRow(ctx, `SELECT id, partition_key FROM transaction_outbox
		WHERE topic = $1 AND status = 'pending' AND payload->>'payout_id' = $2`, kafkax.TopicTransactions, pid).Scan(&cmdID, &key))
	require.Equal(t, w.user, key, "the command that takes the hold is on the user's key")

	claimed := w.claimAndPublish(w.clock.now())
	require.NotContains(t, claimed, cmdID, "the command waits behind the user's earlier credit")
	require.NotContains(t, claimed, creditID)

	// The credit goes out (as the relay would once it can), and only then
	// the command behind it.
	_, err = w.db.Pool.Exec(ctx, `UPDATE transaction_outbox SET status = 'processed', processed_at = now(), finished_at = now()
		WHERE id = $1`, creditID)
	require.NoError(t, err)
	w.credit("evt_before", "pi_before", 3_000)
	require.Eventually(t, func() bool { return w.balance() == 3_000 }, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, []int64{cmdID}, w.claimAndPublish(w.clock.now()))
	w.waitStatus(pid, payout.Awaiting)
	require.EqualValues(t, 3_000-700, w.balance())
	require.Len(t, w.psp.Objects(t, pid), 1)
}

// A SENDING_TO_GATEWAY payout whose create was recorded as sent and whose
// worker died inside the call: the sweeper's resume past the deadline
// marks that create unknown in the payout's history (as a redelivery
// would), not "sending" for ever, and the retry adopts the PSP's object.
func TestSendingPayoutResumedBySweeperRecordsItsUnansweredCreateAsUnknown(t *testing.T) {
	t.Parallel()
	w := setup(t, options{callTimeout: 30 * time.Second, grace: 100 * time.Millisecond})
	w.fundWallet(5000)
	w.pspProxy.swallowCreates.Store(1)
	pid := w.createPayout(700, "ba_1", "stripe")
	w.requestPayout(pid, 700, "stripe")
	<-w.pspProxy.swallowed
	w.stopConsumers() // killed inside the call: its answer is never recorded
	require.Equal(t, payout.Sending, w.payout(pid).Status)
	require.Equal(t, []string{"create:sending"}, w.attempts(pid))

	w.clock.advance(testDeadlines.Sending + time.Minute)
	require.Equal(t, map[string]int{payout.DeadlineResumed: 1}, w.sweep())
	require.Equal(t, payout.Retrying, w.payout(pid).Status)
	require.Equal(t, []string{"create:unknown"}, w.attempts(pid), "the unanswered create may have executed")

	require.Equal(t, 1, w.relay(kafkax.TopicTransactions))
	w.startConsumer()
	p := w.waitStatus(pid, payout.Awaiting, payout.NeedsReview, payout.Finalized)
	require.Equal(t, payout.Awaiting, p.Status, "%+v", p)
	objs := w.psp.Objects(t, pid)
	require.Len(t, objs, 1, "adopted, not sent again")
	require.Equal(t, objs[0].ID, p.Reference)
	require.Equal(t, []string{"create:unknown", "lookup:found"}, w.attempts(pid))
	require.EqualValues(t, 4300, w.balance())
}
