package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/breaker"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/psptest"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/psp"
)

func TestCreditAppliesOncePerPayment(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.credit("evt_pi", "pi_1", 5000)
	w.credit("evt_pi", "pi_1", 5000) // redelivered
	w.credit("evt_ch", "pi_1", 5000) // charge.succeeded for the same payment
	w.credit("evt_other", "pi_2", 700)
	w.waitProcessed("stripe:evt_other")
	w.waitConsumed(kafkax.TopicWebhookPending) // evt_ch and the redelivery change nothing and record nothing
	require.EqualValues(t, 5700, w.balance())
	require.Equal(t, 2, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'credit'`))
	require.Zero(t, w.count(`SELECT count(*) FROM processed_events`), "a credit's ledger transaction is its message's record")
	require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions WHERE message_id = 'stripe:evt_pi'`))
}

func TestCreditWithoutUserIsDeadLetteredWithItsOrigin(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	e := event.PSPEvent{Provider: "stripe", EventID: "evt_nouser", Type: "payment_intent.succeeded", Action: event.ActionCredit,
		Amount: 100, Currency: "usd", Reference: "pi_x", OccurredAt: time.Now()}
	b, _ := json.Marshal(e)
	w.produce(kafkax.TopicWebhookPending, "k", e.MessageID(), b)
	w.waitProcessed(e.MessageID())
	dls := w.deadLetters(kafkax.TopicWebhookPending)
	require.Len(t, dls, 1)
	require.Equal(t, "permanent", dls[0][dlq.HeaderErrorClass])
	require.Equal(t, group, dls[0][dlq.HeaderConsumerGroup])
	require.Contains(t, dls[0][dlq.HeaderError], "without a user id")
}

func TestPayoutHappyPathThenPaidWebhook(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	pid := w.createPayout(1500, "ba_123", "stripe")
	w.requestPayout(pid, 1500, "stripe")
	w.requestPayout(pid, 1500, "stripe") // redelivered command

	p := w.waitStatus(pid, payout.Awaiting)
	require.Equal(t, 1, p.Attempts)
	require.NotEmpty(t, p.Reference)
	require.EqualValues(t, 3500, w.balance(), "the hold is taken before the PSP is called")
	objs := w.psp.Objects(t, pid)
	require.Len(t, objs, 1, "one payout at the PSP despite the redelivery")
	require.Equal(t, psp.IdempotencyKey(pid), objs[0].IdempotencyKey)
	require.Equal(t, p.Reference, objs[0].ID)
	w.waitProcessed("payout:" + pid + ":request")
	require.EqualValues(t, 1, w.pspCalls("stripe", psp.OpCreate, "ok"), "the create was timed, once")
	require.Zero(t, w.pspCalls("stripe", psp.OpFind, "ok")+w.pspCalls("stripe", psp.OpFind, "not_found"), "no lookup")

	w.pspOutcome("evt_paid_"+pid, pid, event.ActionPayoutPaid, time.Now())
	w.waitStatus(pid, payout.Succeeded)
	require.EqualValues(t, 3500, w.balance())
	require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_settle' AND reference = $1`, pid))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM transaction_outbox WHERE topic = 'aegis.settlements' AND event_type = 'payout.succeeded'`))

	// The history shows every step.
	var steps []payout.Status
	rows, _ := w.db.Pool.Query(context.Background(), `SELECT to_status FROM payout_transitions WHERE payout_id = $1 ORDER BY id`, pid)
	for rows.Next() {
		var s payout.Status
		require.NoError(t, rows.Scan(&s))
		steps = append(steps, s)
	}
	require.Equal(t, []payout.Status{payout.Initialized, payout.Sending, payout.Sent, payout.Awaiting, payout.Succeeded}, steps)
}

func TestTransientBurstIsRetriedWithGrowingDelaysAndRecovers(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Next: []psptest.Fault{{Kind: "5xx", Count: 2}}})
	pid := w.createPayout(1000, "ba_1", "stripe")
	w.requestPayout(pid, 1000, "stripe")

	for attempt := 1; attempt <= 2; attempt++ {
		require.Eventually(t, func() bool { p := w.payout(pid); return p.Status == payout.Retrying && p.Attempts == attempt },
			20*time.Second, 20*time.Millisecond, "attempt %d", attempt)
		var next, created time.Time
		require.NoError(t, w.db.Pool.QueryRow(context.Background(), `
			SELECT next_retry_at, created_at FROM transaction_outbox
			WHERE topic = 'aegis.transactions' AND status = 'pending' ORDER BY id DESC LIMIT 1`).Scan(&next, &created))
		d := next.Sub(created) - w.clock.offset() // the retry time is on the processor's clock
		ceiling := time.Duration(5<<(attempt-1)) * time.Second
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.LessOrEqual(t, d, ceiling+time.Second, "attempt %d waits within its ceiling %s", attempt, ceiling)
		// A 5xx may have executed: the retry finds nothing at the PSP, and
		// that counts once the settle window has passed.
		w.passSettleWindow()
		require.Equal(t, 1, w.relay(kafkax.TopicTransactions))
	}
	p := w.waitStatus(pid, payout.Awaiting)
	require.Equal(t, 3, p.Attempts)
	require.Len(t, w.psp.Objects(t, pid), 1)
	require.EqualValues(t, 4000, w.balance())
}

func TestRateLimitHonoursRetryAfterWithoutSpendingAnAttempt(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", RetryAfterSeconds: 42, Next: []psptest.Fault{{Kind: "429", Count: 1}}})
	pid := w.createPayout(1000, "ba_1", "stripe")
	w.requestPayout(pid, 1000, "stripe")
	p := w.waitStatus(pid, payout.Retrying)
	require.Zero(t, p.Attempts, "a 429 spends no attempt")
	require.Equal(t, "rate_limited", p.Class)
	var wait float64
	require.NoError(t, w.db.Pool.QueryRow(context.Background(), `
		SELECT extract(epoch FROM next_retry_at - created_at) FROM transaction_outbox
		WHERE topic = 'aegis.transactions' AND status = 'pending'`).Scan(&wait))
	require.InDelta(t, 42, wait, 2, "Retry-After is honoured")
	w.relay(kafkax.TopicTransactions)
	p = w.waitStatus(pid, payout.Awaiting)
	require.Equal(t, 1, p.Attempts)
}

func TestInvalidAccountFailsReleasesTheHoldOnceAndDeadLetters(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	pid := w.createPayout(1200, "ba_invalid_closed", "stripe")
	w.requestPayout(pid, 1200, "stripe")
	p := w.waitStatus(pid, payout.Finalized)
	require.Equal(t, "permanent", p.Class)
	require.Contains(t, p.LastError, "account_invalid")
	require.EqualValues(t, 5000, w.balance(), "the hold is reversed")
	require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_release' AND reference = $1`, pid))

	dls := w.deadLetters(kafkax.TopicTransactions)
	require.Len(t, dls, 1)
	h := dls[0]
	require.Equal(t, kafkax.TopicTransactions, h[dlq.HeaderOriginalTopic])
	require.Equal(t, group, h[dlq.HeaderConsumerGroup])
	require.Equal(t, "permanent", h[dlq.HeaderErrorClass])
	require.Equal(t, "1", h[dlq.HeaderRetryCount])
	require.Equal(t, "corr-payout:"+pid+":request", h[kafkax.HeaderCorrelationID])
	for _, k := range []string{dlq.HeaderOriginalPartition, dlq.HeaderOriginalOffset, dlq.HeaderError,
		dlq.HeaderRetryHistory, dlq.HeaderFirstFailureAt, dlq.HeaderFailedAt} {
		require.NotEmpty(t, h[k], "dead letter header %s", k)
	}
	_, err := strconv.ParseInt(h[dlq.HeaderOriginalOffset], 10, 64)
	require.NoError(t, err)
	var history []dlq.Attempt
	require.NoError(t, json.Unmarshal([]byte(h[dlq.HeaderRetryHistory]), &history))
	require.NotEmpty(t, history)

	// The dead letter is counted once; it pages from dlq-admin, not here.
	require.Eventually(t, func() bool { return w.deadLettersCounted(kafkax.TopicTransactions, "permanent") == 1.0 }, 10*time.Second, 20*time.Millisecond)
	require.False(t, w.pagedForDeadLetters(), "dlq-admin pages for dead letters, not the worker")

	// A replay of the same command changes nothing.
	w.requestPayout(pid, 1200, "stripe")
	w.relay(kafkax.TopicTransactions)
	w.waitConsumed(kafkax.TopicTransactions)
	require.EqualValues(t, 5000, w.balance())
	require.Len(t, w.psp.Objects(t, pid), 0)
}

func TestTimeoutsToTheLastAttemptNeedReviewAndKeepTheHold(t *testing.T) {
	t.Parallel()
	w := setup(t, options{maxAttempts: 2, callTimeout: 300 * time.Millisecond})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Timeout: "3s", Next: []psptest.Fault{{Kind: "timeout", Count: 2}}})
	pid := w.createPayout(800, "ba_1", "stripe")
	w.requestPayout(pid, 800, "stripe")
	w.waitStatus(pid, payout.Retrying)
	w.passSettleWindow()
	w.relay(kafkax.TopicTransactions)
	p := w.waitStatus(pid, payout.NeedsReview)
	require.Equal(t, 2, p.Attempts)
	require.EqualValues(t, 4200, w.balance(), "an unknown outcome is never auto-reversed")
	require.Zero(t, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_release'`))
	require.Len(t, w.deadLetters(kafkax.TopicTransactions), 1)
}

func TestCrashBetweenPSPCallAndCommitDoesNotPayTwice(t *testing.T) {
	t.Parallel()
	w := setup(t, options{callTimeout: 300 * time.Millisecond})
	w.fundWallet(5000)
	// The PSP creates the payout and the answer is lost: from the worker's
	// side this is a crash after the call. The retry must find the same one.
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Timeout: "3s", Next: []psptest.Fault{{Kind: "timeout_after_create", Count: 1}}})
	pid := w.createPayout(900, "ba_1", "stripe")
	w.requestPayout(pid, 900, "stripe")
	w.waitStatus(pid, payout.Retrying)
	require.Len(t, w.psp.Objects(t, pid), 1, "the PSP did create it")
	w.relay(kafkax.TopicTransactions)
	p := w.waitStatus(pid, payout.Awaiting)
	require.Len(t, w.psp.Objects(t, pid), 1, "the retry reused it")
	require.Equal(t, w.psp.Objects(t, pid)[0].ID, p.Reference)

	// A worker that died after its PSP call left the payout in
	// SENDING_TO_GATEWAY with its message uncommitted: the redelivery resumes.
	pid2 := w.createPayout(900, "ba_1", "stripe")
	_, err := psp.NewStripe(stripeapi.New("sk_test_aegis", w.psp.URL, nil)).CreatePayout(context.Background(),
		psp.Request{PayoutID: pid2, Amount: 900, Currency: "usd", Destination: "ba_1"})
	require.NoError(t, err)
	_, err = w.db.Pool.Exec(context.Background(), `UPDATE payouts SET status = 'SENDING_TO_GATEWAY' WHERE id = $1`, pid2)
	require.NoError(t, err)
	fixture.Hold(pid2, w.user, 900).Insert(t, w.db.Pool)
	w.requestPayout(pid2, 900, "stripe")
	w.waitStatus(pid2, payout.Awaiting)
	require.Len(t, w.psp.Objects(t, pid2), 1, "never two payouts for one payout id")
}

func TestBreakerOpensAndDefersWithoutSpendingAttempts(t *testing.T) {
	t.Parallel()
	w := setup(t, options{breakerFailures: 2})
	w.fundWallet(10000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Next: []psptest.Fault{{Kind: "5xx", Count: 2}}})
	a := w.createPayout(100, "ba_1", "stripe")
	b := w.createPayout(100, "ba_1", "stripe")
	w.requestPayout(a, 100, "stripe")
	w.waitStatus(a, payout.Retrying)
	w.requestPayout(b, 100, "stripe")
	require.Eventually(t, func() bool { return w.payout(b).Attempts == 1 }, 20*time.Second, 20*time.Millisecond)
	// Two consecutive transient failures: open. The next payout is deferred.
	c := w.createPayout(100, "ba_1", "stripe")
	calls := len(w.psp.Calls(t))
	w.requestPayout(c, 100, "stripe")
	p := w.waitStatus(c, payout.Retrying)
	require.Zero(t, p.Attempts, "a deferral spends no attempt")
	require.Equal(t, "breaker_open", p.Class)
	require.Len(t, w.psp.Calls(t), calls, "no call while the breaker is open")
}

func TestInsufficientFundsEndsWithoutCallingThePSP(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(100)
	pid := w.createPayout(1000, "ba_1", "stripe")
	w.requestPayout(pid, 1000, "stripe")
	p := w.waitStatus(pid, payout.Finalized)
	require.Contains(t, p.LastError, "insufficient funds")
	require.Empty(t, w.psp.Objects(t, pid))
	require.EqualValues(t, 100, w.balance())
}

func TestStaleOutcomeIsIgnored(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	pid := w.createPayout(1000, "ba_1", "stripe")
	w.requestPayout(pid, 1000, "stripe")
	w.waitStatus(pid, payout.Awaiting)
	now := time.Now()
	w.pspOutcome("evt_failed", pid, event.ActionPayoutFailed, now)
	w.waitStatus(pid, payout.Finalized)
	// An older payout.paid delivered late must not resurrect or double-move it.
	w.pspOutcome("evt_paid_old", pid, event.ActionPayoutPaid, now.Add(-time.Hour))
	w.waitProcessed("stripe:evt_paid_old")
	require.Equal(t, payout.Finalized, w.payout(pid).Status)
	require.EqualValues(t, 5000, w.balance())
}

func TestPoisonMessageIsDeadLetteredAndDoesNotBlockThePartition(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.produce(kafkax.TopicWebhookPending, w.user, "poison-1", []byte("{not json"))
	w.fundWallet(300) // same key, same partition, after the poison
	require.EqualValues(t, 300, w.balance())
	recs := kafkatest.ReadAll(t, w.kafka, kafkax.DLQTopic(kafkax.TopicWebhookPending), 1, 10*time.Second)
	require.Len(t, recs, 1)
	require.Equal(t, "{not json", string(recs[0].Value))
	require.Equal(t, "poison", kafkax.Header(recs[0], dlq.HeaderErrorClass))
	require.Equal(t, group, kafkax.Header(recs[0], dlq.HeaderConsumerGroup))
}

func TestReplayOfANeedsReviewPayoutRetriesWithTheSameKey(t *testing.T) {
	t.Parallel()
	w := setup(t, options{maxAttempts: 1, callTimeout: 300 * time.Millisecond})
	w.fundWallet(5000)
	// The PSP created the payout but the answer was lost on the last attempt.
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Timeout: "3s", Next: []psptest.Fault{{Kind: "timeout_after_create", Count: 1}}})
	pid := w.createPayout(600, "ba_1", "stripe")
	w.requestPayout(pid, 600, "stripe")
	w.waitStatus(pid, payout.NeedsReview)
	require.EqualValues(t, 4400, w.balance(), "the hold is kept")

	// A copy of an older command that is not an operator's replay (a
	// deferred or re-published one) leaves it waiting for a person: no call,
	// no second dead letter.
	b, _ := json.Marshal(event.PayoutRequested{PayoutID: pid, UserID: w.user, Amount: 600, Currency: "usd", Provider: "stripe"})
	letters := w.count(`SELECT count(*) FROM transaction_outbox WHERE topic = $1`, kafkax.DLQTopic(kafkax.TopicTransactions))
	w.produce(kafkax.TopicTransactions, w.user, event.BusyDeferID("payout:"+pid+":request", 1), b)
	require.Eventually(t, func() bool {
		return w.count(`SELECT count(*) FROM processed_events WHERE event_id = $1`, event.BusyDeferID("payout:"+pid+":request", 1)) == 1
	}, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, payout.NeedsReview, w.payout(pid).Status)
	require.Equal(t, letters, w.count(`SELECT count(*) FROM transaction_outbox WHERE topic = $1`, kafkax.DLQTopic(kafkax.TopicTransactions)))

	// An operator replays the dead letter (dlq-admin gives it a new id).
	w.produce(kafkax.TopicTransactions, w.user, "payout:"+pid+":request:replay:1:1", b)
	p := w.waitStatus(pid, payout.Awaiting)
	require.Len(t, w.psp.Objects(t, pid), 1, "the replay found the PSP's payout instead of paying again")
	require.Equal(t, w.psp.Objects(t, pid)[0].ID, p.Reference)
}

func TestRebalancesNeitherLoseNorDoubleApply(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	const n = 300
	users := []string{"r-a", "r-b", "r-c", "r-d", "r-e", "r-f"}
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			u := users[i%len(users)]
			e := event.PSPEvent{Provider: "stripe", EventID: fmt.Sprintf("evt_rb_%d", i), Type: "payment_intent.succeeded",
				Action: event.ActionCredit, UserID: u, Amount: 10, Currency: "usd", Reference: fmt.Sprintf("pi_rb_%d", i),
				OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}
			b, _ := json.Marshal(e)
			w.produce(kafkax.TopicWebhookPending, u, e.MessageID(), b)
		}
	}
	produce(0, n/3)
	second := w.startConsumer() // a replica joins: rebalance
	produce(n/3, 2*n/3)
	second() // and leaves again: rebalance
	third := w.startConsumer()
	produce(2*n/3, n)
	require.Eventually(t, func() bool {
		return w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'credit' AND reference LIKE 'stripe:pi_rb_%'`) == n
	}, 60*time.Second, 50*time.Millisecond, "every credit applied")
	third()
	w.waitConsumed(kafkax.TopicWebhookPending)
	require.Equal(t, n, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'credit' AND reference LIKE 'stripe:pi_rb_%'`))
	require.Equal(t, n*10, w.count(`SELECT coalesce(sum(balance), 0)::int FROM wallets WHERE kind = 'user' AND owner LIKE 'r-%'`),
		"each credit applied exactly once")
}

func TestBreakerClosesAfterASuccessfulProbe(t *testing.T) {
	t.Parallel()
	w := setup(t, options{breakerFailures: 2, breakerOpenFor: 300 * time.Millisecond})
	w.fundWallet(10000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Next: []psptest.Fault{{Kind: "5xx", Count: 2}}})
	a := w.createPayout(100, "ba_1", "stripe")
	b := w.createPayout(100, "ba_1", "stripe")
	w.requestPayout(a, 100, "stripe")
	w.waitStatus(a, payout.Retrying)
	w.requestPayout(b, 100, "stripe")
	require.Eventually(t, func() bool { return w.payout(b).Attempts == 1 }, 20*time.Second, 20*time.Millisecond)
	// Open now. After the open period, the next call is the probe; it works,
	// the breaker closes, and the rest follow without deferral.
	require.Eventually(t, func() bool { return w.breakers["stripe"].State() == breaker.HalfOpen }, 20*time.Second,
		20*time.Millisecond, "the breaker never let a probe through")
	w.passSettleWindow() // the 5xx may have executed: nothing found counts after the window
	w.relay(kafkax.TopicTransactions)
	w.waitStatus(a, payout.Awaiting)
	w.waitStatus(b, payout.Awaiting)
	c := w.createPayout(100, "ba_1", "stripe")
	w.requestPayout(c, 100, "stripe")
	p := w.waitStatus(c, payout.Awaiting, payout.Retrying)
	require.Equal(t, payout.Awaiting, p.Status, "a closed breaker lets calls through")
	require.Equal(t, 1, p.Attempts)
}
