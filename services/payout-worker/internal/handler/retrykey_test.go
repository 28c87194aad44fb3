package handler_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/psptest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
)

// A payout waiting minutes for its retry (a PSP's Retry-After) holds back
// none of its user's other rows: a credit and a new payout the user makes
// meanwhile, written to the outbox on the user's key as webhook-api writes
// them, are claimed by the relay's own claim at once, and applied; the retry
// itself goes out when it is due and pays the first payout.
func TestPayoutRetryHoldsBackNoneOfItsUsersRows(t *testing.T) {
	w := setup(t, options{})
	ctx := context.Background()
	w.credit("evt_seed", "pi_seed", 10_000)
	require.Eventually(t, func() bool { return w.balance() == 10_000 }, 20*time.Second, 20*time.Millisecond)

	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", RetryAfterSeconds: 600, Next: []psptest.Fault{{Kind: "429", Count: 1}}})
	waiting := w.createPayout(1_000, "ba_1", "stripe")
	w.requestPayout(waiting, 1_000, "stripe")
	w.waitStatus(waiting, payout.Retrying)
	var retryID int64
	var retryKey, retryUser string
	var due time.Time
	require.NoError(t, w.db.Pool.QueryRow(ctx, `
		SELECT id, partition_key, headers->>'user_key', next_retry_at FROM transaction_outbox
		WHERE topic = $1 AND status = 'pending' AND payload->>'payout_id' = $2`, kafkax.TopicTransactions, waiting).
		Scan(&retryID, &retryKey, &retryUser, &due))
	require.Greater(t, time.Until(due), 5*time.Minute, "the retry waits for the PSP's Retry-After")

	// The user's new rows, committed after the retry, on the user's key.
	creditID := w.outboxCredit("evt_later", "pi_later", 2_500)
	next := w.createPayout(500, "ba_1", "stripe")
	nextID := w.outboxPayout(next, 500)

	// The relay's claim, now: the user's rows are due and go out.
	claimed := w.claimAndPublish(time.Now())
	require.Contains(t, claimed, creditID, "the credit waits for nothing")
	require.Contains(t, claimed, nextID, "the new payout waits for nothing")
	require.NotContains(t, claimed, retryID, "the retry is not due")
	require.Eventually(t, func() bool { return w.balance() == 10_000-1_000+2_500-500 }, 20*time.Second, 20*time.Millisecond,
		"the credit is applied and the new payout held while the first waits for its retry")
	w.waitStatus(next, payout.Awaiting)
	require.Equal(t, payout.Retrying, w.payout(waiting).Status)

	// Once due, the retry goes out on its own key and pays the first payout.
	require.Equal(t, payout.RetryKey(waiting), retryKey)
	require.Equal(t, w.user, retryUser, "its dead letter would be filed under the user")
	claimed = w.claimAndPublish(due.Add(time.Second))
	require.Contains(t, claimed, retryID)
	w.waitStatus(waiting, payout.Awaiting)
	require.Len(t, psptest.SuccessfulPayouts(w.psp.Objects(t, waiting)), 1)
}

// A retry keyed by its payout that ends in a dead letter is filed under its
// user, as every other dead letter of the user's payouts: dlq-admin lists
// letters by user (partition_key).
func TestPayoutRetryDeadLetterIsFiledUnderItsUser(t *testing.T) {
	w := setup(t, options{})
	w.fundWallet(5000)
	w.psp.SetFaults(t, psptest.Faults{Provider: "stripe", RetryAfterSeconds: 1, Next: []psptest.Fault{
		{Kind: "429", Count: 1}, {Kind: "invalid_account", Count: 1}}})
	pid := w.createPayout(700, "ba_1", "stripe")
	w.requestPayout(pid, 700, "stripe")
	w.waitStatus(pid, payout.Retrying)
	require.Equal(t, 1, w.relay(kafkax.TopicTransactions))
	w.waitStatus(pid, payout.Finalized)
	var key, msg string
	require.NoError(t, w.db.Pool.QueryRow(context.Background(), `
		SELECT partition_key, headers->>'message_id' FROM transaction_outbox WHERE topic = $1`,
		kafkax.DLQTopic(kafkax.TopicTransactions)).Scan(&key, &msg))
	require.Contains(t, msg, "payout:"+pid+":retry:", "the letter is the retry's")
	require.Equal(t, w.user, key)
}

// outboxCredit writes a verified payment event to the outbox as webhook-api
// does (the user's key, webhook-api's proof) and returns the row's id.
func (w *world) outboxCredit(eventID, reference string, amount int64) int64 {
	w.t.Helper()
	e := event.PSPEvent{Provider: "stripe", EventID: eventID, Type: "payment_intent.succeeded", Action: event.ActionCredit,
		UserID: w.user, Amount: amount, Currency: "usd", Reference: reference, OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}
	b, err := json.Marshal(e)
	require.NoError(w.t, err)
	return w.outboxInsert(outbox.Message{Topic: kafkax.TopicWebhookPending, EventType: e.Type, PartitionKey: w.user, Payload: b,
		Headers: map[string]string{kafkax.HeaderMessageID: e.MessageID(), kafkax.HeaderEventType: e.Type,
			eventproof.Header: w.proof.Sign(e)}})
}

// outboxPayout writes a payout's command to the outbox as webhook-api does
// (the user's key) and returns the row's id.
func (w *world) outboxPayout(id string, amount int64) int64 {
	w.t.Helper()
	b, err := json.Marshal(event.PayoutRequested{PayoutID: id, UserID: w.user, Amount: amount, Currency: "usd", Provider: "stripe"})
	require.NoError(w.t, err)
	typ := string(event.TypePayoutRequested)
	return w.outboxInsert(outbox.Message{Topic: kafkax.TopicTransactions, EventType: typ, PartitionKey: w.user, Payload: b,
		Headers: map[string]string{kafkax.HeaderMessageID: event.PayoutRequestID(id), kafkax.HeaderEventType: typ}})
}

func (w *world) outboxInsert(m outbox.Message) int64 {
	w.t.Helper()
	var id int64
	require.NoError(w.t, database.InTx(context.Background(), w.db.Pool, func(tx pgx.Tx) error {
		var err error
		id, err = outbox.Insert(context.Background(), tx, m)
		return err
	}))
	return id
}

// claimAndPublish is one relay cycle at now with the relay's own claim
// (pkg/outbox): the claimed rows are produced in claim order, each with its
// row's key and headers, and marked processed. It returns their ids.
func (w *world) claimAndPublish(now time.Time) []int64 {
	w.t.Helper()
	ctx := context.Background()
	store := outbox.NewStore(w.db.Pool)
	rows, err := store.Claim(ctx, now, 100, time.Minute, "test-relay")
	require.NoError(w.t, err)
	ids := make([]int64, 0, len(rows))
	for _, r := range rows {
		rec := &kgo.Record{Topic: r.Topic, Key: []byte(r.PartitionKey), Value: r.Payload}
		for k, v := range r.Headers {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		require.NoError(w.t, w.producer.ProduceSync(ctx, rec).FirstErr())
		ids = append(ids, r.ID)
	}
	if len(ids) > 0 {
		_, err = store.DeletePublished(ctx, ids, "test-relay")
		require.NoError(w.t, err)
	}
	return ids
}
