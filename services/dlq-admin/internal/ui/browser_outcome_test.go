package ui_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// letterSpec is a dead letter a test needs; zero fields take defaults.
type letterSpec struct {
	topic, class, errText, eventType, user, corr string
	payload                                      []byte
	headers                                      map[string]string
	at                                           time.Time
}

func addLetter(t *testing.T, db *pgtest.DB, s letterSpec) int64 {
	t.Helper()
	if s.topic == "" {
		s.topic = kafkax.TopicTransactions
	}
	if s.class == "" {
		s.class = "transient"
	}
	if s.errText == "" {
		s.errText = "stripe 503: service unavailable"
	}
	if s.eventType == "" {
		s.eventType = "payout.requested"
	}
	if s.user == "" {
		s.user = "alice"
	}
	if s.at.IsZero() {
		s.at = time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	}
	if s.payload == nil {
		s.payload = []byte(`{"payout_id":"po-x","user_id":"` + s.user + `","amount":1500,"currency":"usd"}`)
	}
	// A distinct offset per letter: the store keeps one letter per record.
	p, o := int32(0), int64(0)
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT coalesce(max(id), 0) + 1 FROM dead_letters`).Scan(&o))
	id, ok, err := dlq.Insert(context.Background(), db.Pool, dlq.Letter{
		Source: dlq.SourceConsumer, OriginalTopic: s.topic, OriginalPartition: &p, OriginalOffset: &o,
		ConsumerGroup: "payout-worker", PartitionKey: s.user, EventType: s.eventType, Payload: s.payload,
		Headers: s.headers, Error: s.errText, ErrorClass: s.class, CorrelationID: s.corr,
		FirstFailureAt: s.at.Add(-time.Minute), FailedAt: s.at,
	})
	require.NoError(t, err)
	require.True(t, ok)
	return id
}

// addPayout stores a payout of alice in status and returns its id.
func addPayout(t *testing.T, db *pgtest.DB, status string) string {
	t.Helper()
	return fixture.Payout{ClientID: "shop", UserID: "alice", Destination: "ba_alice_1", Status: payoutstate.Status(status)}.Insert(t, db.Pool)
}

func payoutPayload(id string) []byte {
	return fmt.Appendf(nil, `{"payout_id":%q,"user_id":"alice","amount":1500,"currency":"usd","provider":"stripe"}`, id)
}

func count(t *testing.T, db *pgtest.DB, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

// TestReplayOutcomesAreColouredByWhatHappened: a replay says what it did,
// in its colour: republished (success), no-op with the payout's state
// (amber, never the success colour), failed again with a link to the new
// letter (red). A permanent error's replay asks for confirmation and a
// reason first.
func TestReplayOutcomesAreColouredByWhatHappened(t *testing.T) {
	t.Parallel()
	forWidths(t, func(t *testing.T, width int) {
		db := pgtest.New(t)
		finalized := addPayout(t, db, "FINALIZED")
		noop := addLetter(t, db, letterSpec{class: "permanent", errText: "stripe 400 account_invalid", payload: payoutPayload(finalized)})
		transient := addLetter(t, db, letterSpec{payload: payoutPayload(addPayout(t, db, "RETRYING"))})
		// A letter replayed earlier whose replay failed again as a new letter.
		earlier := addLetter(t, db, letterSpec{errText: "stripe 504: timed out"})
		_, err := db.Pool.Exec(context.Background(), `UPDATE dead_letters SET status = 'replayed', replay_outcome = 'republished',
			replay_count = 1, resolved_by = 'ops', resolved_at = now() WHERE id = $1`, earlier)
		require.NoError(t, err)
		again := addLetter(t, db, letterSpec{errText: "stripe 504: timed out again", headers: map[string]string{"replay_of": fmt.Sprint(earlier)}})
		url := serve(t, db)
		ctx := browserAt(t, width)
		login(t, ctx, url, "/", operatorToken)

		// Permanent: the page says a replay would change nothing, replay is
		// not the primary button, and it asks to confirm with a reason.
		clickRow(t, ctx, noop)
		waitTitle(t, ctx, noop)
		require.Contains(t, text(t, ctx, "#replay-would"), "already FINALIZED")
		require.Equal(t, "btn ", eval[string](t, ctx, `document.getElementById('replay-btn').className`), "replay is not primary for a permanent error")
		do(t, ctx, chromedp.Click(chromedp.CSS("#replay-btn")))
		until(t, ctx, "confirmation", `!document.getElementById('confirm').hidden`)
		require.Contains(t, text(t, ctx, "#confirm-text"), fmt.Sprintf("Replay 1 letter (#%d)? It failed with a permanent error", noop))
		do(t, ctx, chromedp.Click(chromedp.CSS("#confirm-go")))
		until(t, ctx, "reason asked", `document.getElementById('action-result').textContent.includes('A reason is required')`)
		require.Zero(t, count(t, db, `SELECT count(*) FROM audit_log`), "nothing is sent without a reason")
		do(t, ctx, chromedp.SendKeys(chromedp.CSS("#reason"), "checked: already paid"), chromedp.Click(chromedp.CSS("#confirm-go")))
		until(t, ctx, "replay answer", `document.getElementById('action-result').textContent.startsWith('202')`)
		result := text(t, ctx, "#action-result")
		require.Contains(t, result, "no-op")
		require.Contains(t, result, "payout "+finalized+" is already FINALIZED")
		require.Equal(t, "result noop", eval[string](t, ctx, `document.getElementById('action-result').className`))
		until(t, ctx, "outcome in the detail", `document.getElementById('detail-outcome')?.textContent.includes('is already FINALIZED')`)
		require.Equal(t, "outcome noop", eval[string](t, ctx, `document.getElementById('detail-outcome').className`))
		require.True(t, eval[bool](t, ctx, inView("#action-result")), "the result is in view next to the button")
		shot(t, ctx, fmt.Sprintf("letter-%d", width))
		require.Zero(t, count(t, db, `SELECT count(*) FROM transaction_outbox`), "a no-op publishes nothing")
		require.Equal(t, 1, count(t, db, `SELECT count(*) FROM audit_log WHERE action = 'replay' AND reason = 'checked: already paid'`))

		// Transient: replayed at once, in the success colour.
		clickRow(t, ctx, transient)
		waitTitle(t, ctx, transient)
		require.Equal(t, "btn primary", eval[string](t, ctx, `document.getElementById('replay-btn').className`))
		do(t, ctx, chromedp.Click(chromedp.CSS("#replay-btn")))
		until(t, ctx, "replay answer", `document.getElementById('action-result').textContent.startsWith('202')`)
		require.Equal(t, "result ok", eval[string](t, ctx, `document.getElementById('action-result').className`))
		require.Contains(t, text(t, ctx, "#action-result"), "republished")
		require.True(t, eval[bool](t, ctx, inView("#action-result")))

		// Failed again: red, with a link that opens the new letter.
		do(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/?status=any&letter=%d", url, earlier)))
		waitTitle(t, ctx, earlier)
		require.Equal(t, "outcome fail", eval[string](t, ctx, `document.getElementById('failed-again').className`))
		require.Equal(t, fmt.Sprintf("failed again as #%d", again), text(t, ctx, "#failed-again"))
		do(t, ctx, chromedp.Click(chromedp.CSS("#failed-again a")))
		waitTitle(t, ctx, again)
		until(t, ctx, "deep link", fmt.Sprintf(`location.search.includes('letter=%d')`, again))
	})
}
