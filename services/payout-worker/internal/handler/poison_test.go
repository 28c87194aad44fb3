package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
)

// creditUser publishes a verified credit for user (keyed by user, as the
// relay publishes it).
func (w *world) creditUser(user, eventID string, amount int64) {
	w.t.Helper()
	e := event.PSPEvent{Provider: "stripe", EventID: eventID, Type: "payment_intent.succeeded", Action: event.ActionCredit,
		UserID: user, Amount: amount, Currency: "usd", Reference: "pi_" + eventID, OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}
	b, _ := json.Marshal(e)
	w.produce(kafkax.TopicWebhookPending, user, e.MessageID(), b)
}

func (w *world) balanceOf(user string) int64 {
	w.t.Helper()
	b, err := ledger.Balance(context.Background(), w.db.Pool, user, "usd")
	require.NoError(w.t, err)
	return b
}

// A credit the database refuses every time (the balance would overflow
// bigint, SQLSTATE 22003) must not be retried in place: handleBatch would
// wait on it and no other wallet would be credited again. It is permanent: dead-lettered with its error and class, and the rest flows.
func TestDatabaseRefusalIsDeadLetteredAndOthersAreCredited(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	const huge = 9_000_000_000_000_000_000
	w.creditUser(w.user, id("evt_huge_1"), huge)
	overflow := id("evt_huge_2")
	w.creditUser(w.user, overflow, huge)
	var others []string
	for i := range 30 {
		u := fmt.Sprintf("%s-other-%02d", w.user, i)
		others = append(others, u)
		w.creditUser(u, id("evt_small"), 100)
	}

	require.Eventually(t, func() bool {
		for _, u := range others {
			if w.balanceOf(u) != 100 {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "every other wallet is credited despite the refused credit")
	require.Equal(t, int64(huge), w.balance(), "the first credit stands, the overflowing one changed nothing")

	recs := kafkatest.ReadAll(t, w.kafka, kafkax.DLQTopic(kafkax.TopicWebhookPending), 1, 10*time.Second)
	l, problems := dlq.FromRecord(recs[0])
	require.Empty(t, problems)
	require.Equal(t, "permanent", l.ErrorClass)
	require.Contains(t, l.Error, database.CodeNumericOutOfRange, "the dead letter carries the database's refusal")
	require.Equal(t, group, l.ConsumerGroup)
	require.Equal(t, kafkax.TopicWebhookPending, l.OriginalTopic)
	require.Equal(t, w.user, l.PartitionKey)
	var e event.PSPEvent
	require.NoError(t, json.Unmarshal(l.Payload, &e))
	require.Equal(t, overflow, e.EventID, "the refused credit is the one dead-lettered")
	require.Len(t, l.RetryHistory, 1, "a permanent refusal is not retried")
}
