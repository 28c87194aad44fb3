package handler_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/psptest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/psp"
)

// attempts lists the payout's PSP requests as "kind:outcome".
func (w *world) attempts(pid string) []string {
	w.t.Helper()
	return w.attemptRows(pid, `kind || ':' || outcome`)
}

// attemptRows is expr (SQL over payout_attempts) for each of the payout's
// PSP requests, oldest first.
func (w *world) attemptRows(pid, expr string) []string {
	w.t.Helper()
	rows, err := w.db.Pool.Query(context.Background(),
		`SELECT `+expr+` FROM payout_attempts WHERE payout_id = $1 ORDER BY id`, pid)
	require.NoError(w.t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(w.t, err)
	return out
}

func (w *world) hasAlert(substr string) bool {
	return slices.ContainsFunc(w.alerts.received(), func(k string) bool { return strings.Contains(k, substr) })
}

// deadLettersCounted is aegis_dead_letters_total for the worker's letters
// of topic and class.
func (w *world) deadLettersCounted(topic, class string) float64 {
	w.t.Helper()
	families, err := w.reg.Gather()
	require.NoError(w.t, err)
	for _, f := range families {
		if f.GetName() != dlq.MetricName {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["topic"] == topic && labels["class"] == class {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// pagedForDeadLetters reports whether the worker raised a dead-letter page:
// it must not, dlq-admin pages once it stores the letter (alert.DeadLetterKey).
func (w *world) pagedForDeadLetters() bool { return w.hasAlert("dead_letter:") }

// A signed PSP outcome event is evidence, not a command: one that does not
// match the payout it names changes nothing, is recorded on the payout,
// dead-lettered as outcome_mismatch and alerted on.
func TestOutcomeEventsThatDoNotMatchThePayoutMoveNoMoney(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	pid := w.createPayout(1500, "ba_123", "stripe")
	w.requestPayout(pid, 1500, "stripe")
	w.waitStatus(pid, payout.Awaiting)
	require.EqualValues(t, 3500, w.balance())

	live, other := true, "acct_someone_else"
	forgeries := map[string]func(e *event.PSPEvent){
		"amount":    func(e *event.PSPEvent) { e.Amount = 1 },
		"currency":  func(e *event.PSPEvent) { e.Currency = "eur" },
		"reference": func(e *event.PSPEvent) { e.Reference = "po_not_ours" },
		"provider":  func(e *event.PSPEvent) { e.Provider = "paystack" },
		"account":   func(e *event.PSPEvent) { e.Account = other },
		"livemode":  func(e *event.PSPEvent) { e.Livemode = &live },
	}
	for name, forge := range forgeries {
		for _, action := range []event.Action{event.ActionPayoutFailed, event.ActionPayoutPaid} {
			e := w.outcomeEvent("evt_forged_"+name+"_"+string(action), pid, action, time.Now())
			forge(&e)
			w.publishOutcome(e)
			w.waitProcessed(e.MessageID())
		}
	}
	p := w.payout(pid)
	require.Equal(t, payout.Awaiting, p.Status, "no forged event moved the payout")
	require.EqualValues(t, 3500, w.balance(), "no forged event gave the hold back")
	require.Zero(t, w.count(`SELECT count(*) FROM ledger_transactions WHERE reference = $1 AND kind <> 'payout_hold'`, pid))
	require.Equal(t, 2*len(forgeries), w.count(
		`SELECT count(*) FROM payout_evidence WHERE payout_id = $1 AND verdict = 'outcome_mismatch'`, pid))
	dls := w.deadLetters(kafkax.TopicWebhookPending)
	require.Len(t, dls, 2*len(forgeries))
	for _, d := range dls {
		require.Equal(t, "outcome_mismatch", d[dlq.HeaderErrorClass])
	}
	require.Eventually(t, func() bool {
		return w.deadLettersCounted(kafkax.TopicWebhookPending, "outcome_mismatch") == float64(2*len(forgeries))
	}, 10*time.Second, 20*time.Millisecond)
	require.False(t, w.pagedForDeadLetters(), "dlq-admin pages for dead letters, not the worker")

	// The PSP's real event still finishes it.
	w.pspOutcome("evt_real_paid", pid, event.ActionPayoutPaid, time.Now())
	w.waitStatus(pid, payout.Succeeded)
	require.EqualValues(t, 3500, w.balance())
	require.Equal(t, 1, w.count(`SELECT count(*) FROM payout_evidence WHERE payout_id = $1 AND verdict = 'applied'`, pid))
}

// Once an attempt's outcome is unknown, a later definite failure does not
// give the money back unless the PSP confirms it has no payout.
func TestUnknownThenRefusedNeedsReviewWhenThePSPCannotConfirm(t *testing.T) {
	t.Parallel()
	w := setup(t, options{maxAttempts: 3, callTimeout: 300 * time.Millisecond})
	w.fundWallet(5000)
	// The lookup before the second attempt answers; the one after its
	// refusal cannot.
	w.pspProxy.passLookups.Store(1)
	w.pspProxy.failLookups.Store(true)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Timeout: "3s", Next: []psptest.Fault{
		{Kind: "timeout", Count: 1}, {Kind: "invalid_account", Count: 1}}})
	pid := w.createPayout(700, "ba_1", "stripe")
	w.requestPayout(pid, 700, "stripe")
	w.waitStatus(pid, payout.Retrying)
	w.passSettleWindow() // the first attempt's timeout could still execute until then
	w.relay(kafkax.TopicTransactions)
	p := w.waitStatus(pid, payout.NeedsReview, payout.Finalized)
	require.Equal(t, []string{"create:unknown", "lookup:not_found", "create:refused", "lookup:unknown"}, w.attempts(pid))
	require.Equal(t, payout.NeedsReview, p.Status, "%+v", p)
	require.EqualValues(t, 4300, w.balance(), "the hold is kept: the first attempt may have paid")
	require.Zero(t, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_release' AND reference = $1`, pid))
	require.Len(t, w.deadLetters(kafkax.TopicTransactions), 1)
}

// An unknown outcome followed by a refusal releases the hold when the PSP
// confirms, by a lookup, that it has no payout: and the retry after the
// unknown outcome went out under a new attempt-scoped key.
func TestUnknownThenRefusedReleasesOnlyAfterThePSPConfirmsNothingExists(t *testing.T) {
	t.Parallel()
	w := setup(t, options{maxAttempts: 3, callTimeout: 300 * time.Millisecond})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Timeout: "3s", Next: []psptest.Fault{
		{Kind: "timeout", Count: 1}, {Kind: "invalid_account", Count: 1}}})
	pid := w.createPayout(700, "ba_1", "stripe")
	w.requestPayout(pid, 700, "stripe")
	w.waitStatus(pid, payout.Retrying)
	w.passSettleWindow() // the first attempt's timeout could still execute until then
	w.relay(kafkax.TopicTransactions)
	w.waitStatus(pid, payout.Finalized)
	require.EqualValues(t, 5000, w.balance())
	require.Equal(t, []string{"create:unknown", "lookup:not_found", "create:refused", "lookup:not_found"}, w.attempts(pid))
	var keys []string
	for _, c := range w.psp.Calls(t) {
		if c.PayoutID == pid && c.Method == "POST" {
			keys = append(keys, c.IdempotencyKey)
		}
	}
	require.Equal(t, []string{psp.IdempotencyKey(pid), psp.AttemptKey(pid, 1)}, keys)
}

// A create whose answer was lost: the next attempt finds the PSP's payout
// and adopts it instead of sending again.
func TestUnknownOutcomeIsLookedUpAndAdopted(t *testing.T) {
	t.Parallel()
	w := setup(t, options{callTimeout: 300 * time.Millisecond})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Timeout: "3s", Next: []psptest.Fault{{Kind: "timeout_after_create", Count: 1}}})
	pid := w.createPayout(900, "ba_1", "stripe")
	w.requestPayout(pid, 900, "stripe")
	w.waitStatus(pid, payout.Retrying)
	w.relay(kafkax.TopicTransactions)
	p := w.waitStatus(pid, payout.Awaiting)
	objs := w.psp.Objects(t, pid)
	require.Len(t, objs, 1)
	require.Equal(t, objs[0].ID, p.Reference)
	require.Equal(t, []string{"create:unknown", "lookup:found"}, w.attempts(pid))
}

// Past the PSP's idempotency window the first key is forgotten: the payout
// is looked up before it is sent again, and sent under a new key.
func TestRetryAfterTheIdempotencyWindowLooksUpFirst(t *testing.T) {
	t.Parallel()
	w := setup(t, options{idempotencyWindow: time.Millisecond})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", RetryAfterSeconds: 1, Next: []psptest.Fault{{Kind: "429", Count: 1}}})
	pid := w.createPayout(400, "ba_1", "stripe")
	w.requestPayout(pid, 400, "stripe")
	w.waitStatus(pid, payout.Retrying)
	w.relay(kafkax.TopicTransactions)
	w.waitStatus(pid, payout.Awaiting)
	require.Equal(t, []string{"create:not_executed", "lookup:not_found", "create:accepted"}, w.attempts(pid))
	objs := w.psp.Objects(t, pid)
	require.Len(t, objs, 1)
	require.Equal(t, psp.AttemptKey(pid, 1), objs[0].IdempotencyKey)
}

// An operator's replay of a NEEDS_REVIEW payout looks it up: nothing at the
// PSP, so it is sent under a new key.
func TestReplayOfANeedsReviewPayoutWithNothingAtThePSPSendsUnderANewKey(t *testing.T) {
	t.Parallel()
	w := setup(t, options{maxAttempts: 1, callTimeout: 300 * time.Millisecond})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Timeout: "3s", Next: []psptest.Fault{{Kind: "timeout", Count: 1}}})
	pid := w.createPayout(600, "ba_1", "stripe")
	w.requestPayout(pid, 600, "stripe")
	w.waitStatus(pid, payout.NeedsReview)
	require.Empty(t, w.psp.Objects(t, pid))
	w.passSettleWindow()

	b, _ := json.Marshal(event.PayoutRequested{PayoutID: pid, UserID: w.user, Amount: 600, Currency: "usd", Provider: "stripe"})
	w.produce(kafkax.TopicTransactions, w.user, "payout:"+pid+":request:replay:1:1", b)
	p := w.waitStatus(pid, payout.Awaiting)
	objs := w.psp.Objects(t, pid)
	require.Len(t, objs, 1)
	require.Equal(t, objs[0].ID, p.Reference)
	require.Equal(t, psp.AttemptKey(pid, 1), objs[0].IdempotencyKey)
}

// An outcome event for a NEEDS_REVIEW payout is recorded; only one that
// passes the cross-checks resolves it.
func TestOutcomeEventResolvesANeedsReviewPayoutOnlyWhenItMatches(t *testing.T) {
	t.Parallel()
	w := setup(t, options{maxAttempts: 1, callTimeout: 300 * time.Millisecond})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Timeout: "3s", Next: []psptest.Fault{{Kind: "timeout_after_create", Count: 1}}})
	pid := w.createPayout(600, "ba_1", "stripe")
	w.requestPayout(pid, 600, "stripe")
	w.waitStatus(pid, payout.NeedsReview)
	objs := w.psp.Objects(t, pid)
	require.Len(t, objs, 1)

	forged := w.outcomeEvent("evt_nr_forged", pid, event.ActionPayoutFailed, time.Now())
	forged.Amount = 60000
	forged.Reference = objs[0].ID
	w.publishOutcome(forged)
	w.waitProcessed(forged.MessageID())
	require.Equal(t, payout.NeedsReview, w.payout(pid).Status)
	require.EqualValues(t, 4400, w.balance())

	real := w.outcomeEvent("evt_nr_paid", pid, event.ActionPayoutPaid, time.Now())
	real.Reference = objs[0].ID
	w.publishOutcome(real)
	p := w.waitStatus(pid, payout.Succeeded)
	require.Equal(t, objs[0].ID, p.Reference)
	require.EqualValues(t, 4400, w.balance())
	require.Equal(t, 1, w.count(`SELECT count(*) FROM payout_evidence WHERE payout_id = $1 AND verdict = 'outcome_mismatch'`, pid))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM payout_evidence WHERE payout_id = $1 AND verdict = 'applied'`, pid))
}

// A payout the PSP paid after we had given its hold back waits for a
// person: neither a replay nor another paid event settles a hold that is
// no longer there.
func TestPaidAfterReleaseIsNeverSettledFromAHoldThatIsGone(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	w.fundWallet(5000)
	pid := w.createPayout(1200, "ba_invalid_closed", "stripe")
	w.requestPayout(pid, 1200, "stripe")
	w.waitStatus(pid, payout.Finalized)
	require.EqualValues(t, 5000, w.balance())

	w.pspOutcome("evt_paid_late", pid, event.ActionPayoutPaid, time.Now())
	w.waitStatus(pid, payout.NeedsReview)

	b, _ := json.Marshal(event.PayoutRequested{PayoutID: pid, UserID: w.user, Amount: 1200, Currency: "usd", Provider: "stripe"})
	w.produce(kafkax.TopicTransactions, w.user, "payout:"+pid+":request:replay:9:1", b)
	w.waitProcessed("payout:" + pid + ":request:replay:9:1")
	w.pspOutcome("evt_paid_again", pid, event.ActionPayoutPaid, time.Now().Add(time.Second))
	w.waitProcessed("stripe:evt_paid_again")

	require.Equal(t, payout.NeedsReview, w.payout(pid).Status)
	require.Zero(t, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_settle' AND reference = $1`, pid))
	require.Zero(t, w.count(`SELECT count(*) FROM payout_attempts WHERE payout_id = $1 AND at > now() - interval '1 minute' AND kind = 'lookup'`, pid),
		"nothing was sent or looked up")
	require.EqualValues(t, 5000, w.balance())
}

// Paystack: a transfer whose answer was lost is verified by its reference
// and adopted; its outcome events are held to the same checks.
func TestPaystackLostAnswerIsVerifiedAndItsEventsCrossChecked(t *testing.T) {
	t.Parallel()
	w := setup(t, options{callTimeout: 300 * time.Millisecond})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "paystack", Timeout: "3s", Next: []psptest.Fault{{Kind: "timeout_after_create", Count: 1}}})
	pid := w.createPayout(900, "RCP_lost", "paystack")
	w.requestPayout(pid, 900, "paystack")
	w.waitStatus(pid, payout.Retrying)
	w.relay(kafkax.TopicTransactions)
	p := w.waitStatus(pid, payout.Awaiting, payout.Succeeded)
	objs := w.psp.Objects(t, pid)
	require.Len(t, objs, 1)
	require.Equal(t, []string{"create:unknown", "lookup:found"}, w.attempts(pid))
	require.NotEmpty(t, p.Reference)
	if p.Status == payout.Succeeded {
		return // the stand-in answered the transfer as paid already
	}

	transferFailed := func(id string, amount int64, currency string) event.PSPEvent {
		return event.PSPEvent{Provider: "paystack", EventID: id, Type: "transfer.failed", Action: event.ActionPayoutFailed,
			PayoutID: pid, Reference: p.Reference, Amount: amount, Currency: currency, OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}
	}
	forged := transferFailed("transfer.failed:forged", 900, "ngn")
	w.publishOutcome(forged)
	w.waitProcessed(forged.MessageID())
	require.Equal(t, payout.Awaiting, w.payout(pid).Status, "a transfer in another currency is not this payout")
	require.EqualValues(t, 4100, w.balance())

	real := transferFailed("transfer.failed:real", 900, "usd")
	w.publishOutcome(real)
	w.waitStatus(pid, payout.Finalized)
	require.EqualValues(t, 5000, w.balance(), "the PSP's own failure gives the hold back")
}

// A forged-but-signed outcome event (wrong amount) dated after the genuine
// one changes nothing and does not make the genuine event, dated earlier,
// look stale: the genuine one finishes the payout. The envelope's stale
// flag, which webhook-api used to set from every event it had seen
// (forged ones included), is not trusted: order is judged against the
// events applied to the payout.
func TestForgedEventDatedAheadDoesNotMakeTheGenuineOneStale(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		action  event.Action
		status  payout.Status
		balance int64
		ledger  string
	}{
		{event.ActionPayoutPaid, payout.Succeeded, 3500, "payout_settle"},
		{event.ActionPayoutFailed, payout.Finalized, 5000, "payout_release"},
	} {
		t.Run(string(tc.action), func(t *testing.T) {
			t.Parallel()
			w := setup(t, options{})
			w.fundWallet(5000)
			pid := w.createPayout(1500, "ba_1", "stripe")
			w.requestPayout(pid, 1500, "stripe")
			w.waitStatus(pid, payout.Awaiting)
			now := time.Now()

			forged := w.outcomeEvent("evt_forged_ahead", pid, event.ActionPayoutPaid, now.Add(time.Minute))
			forged.Amount = 150000
			w.publishOutcome(forged)
			w.waitProcessed(forged.MessageID())
			require.Equal(t, payout.Awaiting, w.payout(pid).Status)

			genuine := w.outcomeEvent("evt_genuine_behind", pid, tc.action, now)
			genuine.Stale = true // as webhook-api flagged it, counting the forged event
			w.publishOutcome(genuine)
			w.waitStatus(pid, tc.status)
			require.EqualValues(t, tc.balance, w.balance())
			require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = $1 AND reference = $2`, tc.ledger, pid))
			require.Equal(t, 1, w.count(`SELECT count(*) FROM payout_evidence WHERE payout_id = $1 AND verdict = 'outcome_mismatch'`, pid))
			require.Equal(t, 1, w.count(`SELECT count(*) FROM payout_evidence WHERE payout_id = $1 AND verdict = 'applied' AND event_id = $2`,
				pid, genuine.EventID))
		})
	}
}

// A payout whose answer was lost and that the PSP paid meanwhile is settled
// by the retry's lookup; its payout.paid webhook never came. An old
// payout.failed replayed afterwards is older than the PSP's record the
// lookup read: stale, no money goes back.
func TestOldFailureAfterALookupFoundThePayoutPaidIsStale(t *testing.T) {
	t.Parallel()
	w := setup(t, options{callTimeout: 300 * time.Millisecond})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", Timeout: "3s", Next: []psptest.Fault{{Kind: "timeout_after_create", Count: 1}}})
	pid := w.createPayout(900, "ba_1", "stripe")
	w.requestPayout(pid, 900, "stripe")
	w.waitStatus(pid, payout.Retrying)
	objs := w.psp.Objects(t, pid)
	require.Len(t, objs, 1)
	w.psp.Settle(t, objs[0].ID, "paid")
	w.relay(kafkax.TopicTransactions)
	w.waitStatus(pid, payout.Succeeded)

	w.pspOutcome("evt_old_"+pid, pid, event.ActionPayoutFailed, time.Now().Add(-48*time.Hour))
	w.waitProcessed("stripe:evt_old_" + pid)
	require.Equal(t, payout.Succeeded, w.payout(pid).Status)
	require.EqualValues(t, 4100, w.balance())
	require.Zero(t, w.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_return' AND reference = $1`, pid))
}
