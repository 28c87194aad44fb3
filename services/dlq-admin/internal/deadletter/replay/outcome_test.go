package replay_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
)

// payout stores a payout in status and returns its id.
func (b *bundle) payout(t *testing.T, status string) string {
	t.Helper()
	return fixture.Payout{ClientID: "shop", UserID: "alice", Amount: 700, Status: payoutstate.Status(status)}.Insert(t, b.db.Pool)
}

// commandLetter is a dead-lettered payout command for payoutID.
func (b *bundle) commandLetter(t *testing.T, payoutID string) int64 {
	return b.letter(t, func(l *dlq.Letter) {
		l.Payload = fmt.Appendf(nil, `{"payout_id":%q,"user_id":"alice","amount":700,"currency":"usd","provider":"stripe"}`, payoutID)
	})
}

// eventLetter is a dead-lettered PSP event on aegis.webhook.pending.
func (b *bundle) eventLetter(t *testing.T, payload string) int64 {
	return b.letter(t, func(l *dlq.Letter) {
		l.OriginalTopic, l.ConsumerGroup, l.EventType = kafkax.TopicWebhookPending, "payout-worker", "payout.paid"
		l.Payload = []byte(payload)
	})
}

func TestReplayOfAFinishedSubjectIsANoopAndSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	paidPayout := b.payout(t, "SUCCEEDED")
	fixture.Evidence{PayoutID: paidPayout, EventID: "evt_paid", EventType: "payout.paid", Verdict: "applied"}.Insert(t, b.db.Pool)
	fixture.Evidence{PayoutID: paidPayout, EventID: "evt_stale", EventType: "payout.paid", Verdict: "stale"}.Insert(t, b.db.Pool)
	fixture.Credit("alice", 5000, "stripe:pi_done").Insert(t, b.db.Pool)
	outcomeEvent := func(eventID string) string {
		return fmt.Sprintf(`{"provider":"stripe","event_id":%q,"type":"payout.paid","action":"payout_paid","payout_id":%q,"amount":700,"currency":"usd"}`,
			eventID, paidPayout)
	}
	credit := func(ref string) string {
		return fmt.Sprintf(`{"provider":"stripe","event_id":"evt_%s","type":"payment_intent.succeeded","action":"credit","user_id":"alice","reference":%q,"amount":5000,"currency":"usd"}`, ref, ref)
	}

	cases := []struct {
		name   string
		letter func() int64
		// state is the subject state of a no-op, "" for a republish.
		state string
	}{
		{"payout FINALIZED", func() int64 { return b.commandLetter(t, b.payout(t, "FINALIZED")) }, "FINALIZED"},
		{"payout SUCCEEDED", func() int64 { return b.commandLetter(t, b.payout(t, "SUCCEEDED")) }, "SUCCEEDED"},
		{"payout FAILED", func() int64 { return b.commandLetter(t, b.payout(t, "FAILED")) }, "FAILED"},
		{"payout at the PSP", func() int64 { return b.commandLetter(t, b.payout(t, "AWAITING_RESPONSE")) }, "AWAITING_RESPONSE"},
		{"payout RETRYING", func() int64 { return b.commandLetter(t, b.payout(t, "RETRYING")) }, ""},
		{"payout NEEDS_REVIEW", func() int64 { return b.commandLetter(t, b.payout(t, "NEEDS_REVIEW")) }, ""},
		{"payout INITIALIZED", func() int64 { return b.commandLetter(t, b.payout(t, "INITIALIZED")) }, ""},
		{"no such payout", func() int64 { return b.commandLetter(t, "0193a1b2-0000-7000-8000-000000000001") }, ""},
		{"payout id not a uuid", func() int64 { return b.commandLetter(t, "p-1") }, ""},
		{"outcome event applied", func() int64 { return b.eventLetter(t, outcomeEvent("evt_paid")) }, "SUCCEEDED"},
		{"outcome event only recorded as stale", func() int64 { return b.eventLetter(t, outcomeEvent("evt_stale")) }, ""},
		{"outcome event never seen", func() int64 { return b.eventLetter(t, outcomeEvent("evt_new")) }, ""},
		{"credit already posted", func() int64 { return b.eventLetter(t, credit("pi_done")) }, replay.StateCredited},
		{"credit not posted", func() int64 { return b.eventLetter(t, credit("pi_new")) }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.letter()
			before := len(b.outbox(t))
			res, err := b.svc.Replay(ctx, id, "bob", "retry")
			require.NoError(t, err)
			require.Equal(t, store.StatusReplayed, res.Letter.Status)
			require.NotNil(t, res.Letter.ReplayOutcome)
			var outcome, auditOutcome string
			var auditOutbox *int64
			require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT detail->>'outcome', (detail->>'outbox_id')::bigint
				FROM audit_log WHERE target_id = $1::bigint::text AND action = 'replay'`, id).Scan(&auditOutcome, &auditOutbox))
			row := b.db.Pool.QueryRow(ctx, `SELECT replay_outcome FROM dead_letters WHERE id = $1`, id)
			require.NoError(t, row.Scan(&outcome))
			if tc.state == "" {
				require.Equal(t, store.OutcomeRepublished, res.Outcome)
				require.NotZero(t, res.OutboxID)
				require.Empty(t, res.SubjectState)
				require.Len(t, b.outbox(t), before+1, "republished: one outbox row")
				require.Equal(t, store.OutcomeRepublished, outcome)
				require.Equal(t, store.OutcomeRepublished, auditOutcome)
				require.Equal(t, res.OutboxID, *auditOutbox)
				return
			}
			require.Equal(t, store.OutcomeNoop, res.Outcome)
			require.Zero(t, res.OutboxID)
			require.Equal(t, tc.state, res.SubjectState)
			require.Len(t, b.outbox(t), before, "a no-op publishes nothing")
			require.Equal(t, store.OutcomeNoop, outcome)
			require.Equal(t, tc.state, *res.Letter.ReplaySubjectState)
			require.Nil(t, res.Letter.ReplayOutboxID)
			require.Equal(t, store.OutcomeNoop, auditOutcome)
			require.Nil(t, auditOutbox)

			// Resolved all the same: a second replay is refused.
			_, err = b.svc.Replay(ctx, id, "bob", "again")
			require.ErrorIs(t, err, replay.ErrNotOpen)
		})
	}
}

func TestJobCountsNoopsApartFromRepublished(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startRunner(t, "runner-a")
	done := b.commandLetter(t, b.payout(t, "FINALIZED"))
	again := b.commandLetter(t, b.payout(t, "RETRYING"))
	poison := b.letter(t, func(l *dlq.Letter) { l.Payload = []byte("\x00not json") })

	job, err := b.svc.CreateJob(context.Background(), "bob", request(10))
	require.NoError(t, err)
	job = b.waitFinished(t, job.ID)
	require.Equal(t, replay.JobDone, job.Status)
	require.Equal(t, 3, job.Matched)
	require.Equal(t, 1, job.Replayed, "republished")
	require.Equal(t, 1, job.Noop)
	require.Equal(t, 1, job.Failed, "not replayable")
	require.Len(t, b.outbox(t), 1)

	for id, want := range map[int64]string{done: store.OutcomeNoop, again: store.OutcomeRepublished} {
		d, err := b.st.Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, want, *d.ReplayOutcome, "letter %d", id)
	}
	d, err := b.st.Get(context.Background(), poison)
	require.NoError(t, err)
	require.Equal(t, store.StatusOpen, d.Status)
	require.Nil(t, d.ReplayOutcome)

	// Per letter, what the job did.
	letters, err := b.svc.JobLetters(context.Background(), job.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, letters, 3)
	require.Equal(t, []int64{done, again, poison}, []int64{letters[0].DeadLetterID, letters[1].DeadLetterID, letters[2].DeadLetterID})
	require.Equal(t, store.OutcomeNoop, letters[0].Outcome)
	require.Equal(t, "FINALIZED", letters[0].SubjectState)
	require.Zero(t, letters[0].OutboxID)
	require.Equal(t, store.OutcomeRepublished, letters[1].Outcome)
	require.Equal(t, b.outbox(t)[0].ID, letters[1].OutboxID)
	require.Equal(t, replay.JobLetterNotReplayable, letters[2].Outcome)
	require.Contains(t, letters[2].Error, "not JSON")
	page, err := b.svc.JobLetters(context.Background(), job.ID, again, 10)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, poison, page[0].DeadLetterID)
	_, err = b.svc.JobLetters(context.Background(), job.ID+1, 0, 10)
	require.ErrorIs(t, err, replay.ErrJobNotFound)
}

func TestDetailNamesTheLettersAReplayBecame(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.commandLetter(t, b.payout(t, "RETRYING"))
	_, err := b.svc.Replay(ctx, id, "bob", "")
	require.NoError(t, err)
	d, err := b.st.Get(ctx, id)
	require.NoError(t, err)
	require.Empty(t, d.FailedAgainAs)

	// The replayed message fails again: its letter carries the outbox
	// row's headers, replay_of among them.
	row := b.outbox(t)[0]
	again := b.letter(t, func(l *dlq.Letter) { l.Headers = row.Headers })
	b.letter(t, nil) // unrelated
	d, err = b.st.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, []int64{again}, d.FailedAgainAs)
}

// A NEEDS_REVIEW payout with several letters (its retries lost while
// Postgres was away, then its deadline's escalation) is resumed by the
// newest one only: replaying them all would send it once per letter and,
// refused each time, park it with one new open letter per replay.
func TestOnlyTheNewestLetterOfAPayoutInReviewResumesIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.payout(t, "NEEDS_REVIEW")
	other := b.payout(t, "NEEDS_REVIEW")
	older, middle := b.commandLetter(t, p), b.commandLetter(t, p)
	otherLetter := b.commandLetter(t, other)
	newest := b.commandLetter(t, p)

	for _, id := range []int64{older, middle} {
		res, err := b.svc.Replay(ctx, id, "bob", "replay all")
		require.NoError(t, err)
		require.Equal(t, store.OutcomeNoop, res.Outcome, "letter %d", id)
		require.Equal(t, replay.StateSuperseded, res.SubjectState)
	}
	before := len(b.outbox(t))
	res, err := b.svc.Replay(ctx, newest, "bob", "replay all")
	require.NoError(t, err)
	require.Equal(t, store.OutcomeRepublished, res.Outcome, "the newest letter resumes the payout")
	require.Len(t, b.outbox(t), before+1)
	// Another payout's letter, older than this one's newest, is its own.
	res, err = b.svc.Replay(ctx, otherLetter, "bob", "replay all")
	require.NoError(t, err)
	require.Equal(t, store.OutcomeRepublished, res.Outcome)
}
