package handler_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
)

// reviewed takes a payout of 1500 to AWAITING_RESPONSE and then parks it in
// NEEDS_REVIEW as the sweeper does when the PSP no longer knows it (the
// stand-in forgets everything): the hold is kept.
func (w *world) reviewedMissing() string {
	w.t.Helper()
	pid, _ := w.awaiting("ba_123")
	req, err := http.NewRequest(http.MethodDelete, w.psp.URL+"/_psp/state", nil)
	require.NoError(w.t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	resp.Body.Close()
	w.clock.advance(sweepCfg.After + time.Second)
	require.Equal(w.t, map[string]int{payout.SweptReview: 1}, w.sweep())
	require.Equal(w.t, payout.NeedsReview, w.payout(pid).Status)
	return pid
}

// resolve stores a resolution as dlq-admin does (closing the payout's
// decided ones first, so that payout_resolutions_open_idx admits it) and
// publishes its command under messageID; it returns the resolution id.
func (w *world) resolve(pid, outcome, objectID, messageID string) string {
	w.t.Helper()
	rid := uuid.Must(uuid.NewV7()).String()
	_, err := w.db.Pool.Exec(context.Background(), `
		UPDATE payout_resolutions r SET status = v.status FROM resolution_verdicts_for_ops v
		WHERE v.resolution_id = r.id AND r.payout_id = $1 AND r.status = 'pending'`, pid)
	require.NoError(w.t, err)
	fixture.Resolution{ID: rid, PayoutID: pid, UserID: w.user, Outcome: outcome, PSPObjectID: objectID}.Insert(w.t, w.db.Pool)
	w.sendResolution(rid, pid, outcome, objectID, messageID)
	return rid
}

func (w *world) sendResolution(rid, pid, outcome, objectID, messageID string) {
	w.t.Helper()
	b, _ := json.Marshal(event.PayoutResolution{ResolutionID: rid, PayoutID: pid, UserID: w.user, Outcome: outcome,
		Reason: "checked the PSP dashboard", PSPObjectID: objectID, Operator: "alice"})
	if messageID == "" {
		messageID = event.PayoutResolutionID(rid)
	}
	rec := map[string]string{kafkax.HeaderEventType: string(event.TypePayoutResolution)}
	w.produceWith(kafkax.TopicTransactions, w.user, messageID, b, rec)
	w.waitProcessed(messageID)
}

// resolution returns resolution rid's status and PSP answer as dlq-admin
// shows them.
func (w *world) resolution(rid string) (status, answer string) {
	w.t.Helper()
	require.NoError(w.t, w.db.Pool.QueryRow(context.Background(),
		`SELECT status, coalesce(psp_answer, '') FROM payout_resolutions_state WHERE id = $1`, rid).Scan(&status, &answer))
	return status, answer
}

func (w *world) postings(pid, kind string) int {
	w.t.Helper()
	return w.count(`SELECT count(*) FROM ledger_transactions WHERE reference = $1 AND kind = $2`, pid, kind)
}

// The PSP has no object for the payout (why it is in review): the
// operator's evidence decides. Failed releases the hold once; the same
// command replayed under another message id changes nothing.
func TestResolutionAsFailedReleasesTheHoldOnce(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	pid := w.reviewedMissing()

	rid := w.resolve(pid, "failed", "po_seen_on_dashboard", "")
	status, answer := w.resolution(rid)
	require.Equal(t, payout.ResolutionApplied, status)
	require.Contains(t, answer, "no object")
	require.Equal(t, payout.Finalized, w.payout(pid).Status)
	require.EqualValues(t, 5000, w.balance(), "the hold is given back")
	require.Equal(t, 1, w.postings(pid, "payout_release"))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM payout_transitions WHERE payout_id = $1 AND to_status = 'FAILED'
		AND detail->>'resolution_id' = $2 AND detail->>'operator' = 'alice' AND detail->>'psp_object_id' = 'po_seen_on_dashboard'`, pid, rid))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM payout_evidence WHERE payout_id = $1 AND event_type = 'operator_resolution'
		AND verdict = 'applied'`, pid))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM transaction_outbox WHERE topic = 'aegis.settlements'
		AND payload->>'payout_id' = $1 AND payload->>'status' = 'FINALIZED'`, pid))

	// A replay of the command (dlq-admin gives it a new message id).
	w.sendResolution(rid, pid, "failed", "po_seen_on_dashboard", event.ReplayID(event.PayoutResolutionID(rid), 1, 1))
	require.EqualValues(t, 5000, w.balance())
	require.Equal(t, 1, w.postings(pid, "payout_release"), "released exactly once")
	require.Equal(t, 1, w.count(`SELECT count(*) FROM payout_evidence WHERE payout_id = $1 AND event_type = 'operator_resolution'`, pid))
}

// The PSP paid: an operator who says failed is refused and the hold stays;
// paid with the PSP's object settles it once.
func TestResolutionThePSPContradictsIsRefused(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	pid, ref := w.awaiting("ba_123")
	w.psp.Settle(t, ref, "paid")
	// Parked for review (as an exhausted retry whose outcome was unknown
	// would be); the sweeper only looks at payouts still waiting.
	_, err := w.db.Pool.Exec(context.Background(), `UPDATE payouts SET status = 'NEEDS_REVIEW' WHERE id = $1`, pid)
	require.NoError(t, err)

	rid := w.resolve(pid, "failed", ref, "")
	status, answer := w.resolution(rid)
	require.Equal(t, payout.ResolutionRefused, status)
	require.Contains(t, answer, "PSP says the payout was paid")
	require.Contains(t, answer, ref)
	require.Equal(t, payout.NeedsReview, w.payout(pid).Status)
	require.EqualValues(t, 3500, w.balance(), "never given back while the PSP paid")
	require.Zero(t, w.postings(pid, "payout_release"))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM payout_evidence WHERE payout_id = $1 AND event_type = 'operator_resolution'
		AND verdict = 'recorded'`, pid))

	// Evidence naming another object is refused too.
	rid = w.resolve(pid, "paid", "po_someone_else", "")
	status, answer = w.resolution(rid)
	require.Equal(t, payout.ResolutionRefused, status)
	require.Contains(t, answer, "not po_someone_else")
	require.Zero(t, w.postings(pid, "payout_settle"))

	rid = w.resolve(pid, "paid", ref, "")
	status, _ = w.resolution(rid)
	require.Equal(t, payout.ResolutionApplied, status)
	require.Equal(t, payout.Succeeded, w.payout(pid).Status)
	require.Equal(t, 1, w.postings(pid, "payout_settle"))
	require.EqualValues(t, 3500, w.balance())
}

// A lookup that fails proves nothing: the resolution is refused and nothing
// moves; the operator resolves again once the PSP answers.
func TestResolutionIsRefusedWhenThePSPCannotBeAsked(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	pid := w.reviewedMissing()
	w.pspProxy.failLookups.Store(true)
	rid := w.resolve(pid, "failed", "po_x", "")
	status, answer := w.resolution(rid)
	require.Equal(t, payout.ResolutionRefused, status)
	require.Contains(t, answer, "lookup failed")
	require.Equal(t, payout.NeedsReview, w.payout(pid).Status)
	require.EqualValues(t, 3500, w.balance())
}

// produceWith is produce with extra headers (the event type).
func (w *world) produceWith(topic, key, messageID string, value []byte, headers map[string]string) {
	w.t.Helper()
	rec := &kgo.Record{Topic: topic, Key: []byte(key), Value: value, Headers: []kgo.RecordHeader{
		{Key: kafkax.HeaderMessageID, Value: []byte(messageID)},
		{Key: kafkax.HeaderCorrelationID, Value: []byte("corr-" + messageID)},
	}}
	for k, v := range headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	w.sign(rec)
	require.NoError(w.t, w.producer.ProduceSync(context.Background(), rec).FirstErr())
}

// The worker's verdict is a resolution_verdicts row, written with the
// posting it decides; dlq-admin's payout_resolutions row is left as
// dlq-admin wrote it.
func TestResolutionVerdictIsTheWorkersOwnRow(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	pid := w.reviewedMissing()
	before := w.clock.now()

	rid := w.resolve(pid, "failed", "po_seen_on_dashboard", "")
	var status, answer string
	var decided time.Time
	require.NoError(t, w.db.Pool.QueryRow(context.Background(),
		`SELECT status, psp_answer, decided_at FROM resolution_verdicts WHERE resolution_id = $1`, rid).Scan(&status, &answer, &decided))
	require.Equal(t, payout.ResolutionApplied, status)
	require.Contains(t, answer, "no object")
	require.False(t, decided.Before(before.Truncate(time.Microsecond)), "decided at %v, before the command (%v)", decided, before)
	require.Equal(t, 1, w.postings(pid, "payout_release"))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM payout_resolutions WHERE id = $1 AND status = 'pending'
		AND psp_answer IS NULL AND decided_at IS NULL`, rid), "payout_resolutions is dlq-admin's")
}

// During a rollout the previous worker writes its verdict on
// payout_resolutions: a command for a resolution it decided (a replay, a
// redelivery) finds it decided and changes nothing, and no second verdict
// is written.
func TestResolutionThePreviousWorkerDecidedIsNotDecidedAgain(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	pid := w.reviewedMissing()
	rid := uuid.Must(uuid.NewV7()).String()
	fixture.Resolution{ID: rid, PayoutID: pid, UserID: w.user, Outcome: "failed", PSPObjectID: "po_x", Status: "refused",
		PSPAnswer: "lookup failed: 503", DecidedAt: time.Now()}.Insert(t, w.db.Pool)

	w.sendResolution(rid, pid, "failed", "po_x", "")
	status, answer := w.resolution(rid)
	require.Equal(t, payout.ResolutionRefused, status)
	require.Equal(t, "lookup failed: 503", answer)
	require.Zero(t, w.count(`SELECT count(*) FROM resolution_verdicts WHERE resolution_id = $1`, rid))
	require.Zero(t, w.postings(pid, "payout_release"), "the previous worker refused it: nothing moves")
	require.Equal(t, payout.NeedsReview, w.payout(pid).Status)
	require.EqualValues(t, 3500, w.balance())
}
