package relay_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbox"
)

// A row keyed by something other than its user (a payout's retry, keyed by
// its payout so that it holds back none of the user's rows) is published
// on its own key, and its dead letter is filed under the user it names:
// dead letters are listed by user.
func TestDeadLetterOfARowKeyedOtherwiseIsFiledUnderItsUser(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: kafkax.TopicTransactions, Err: kerr.MessageTooLarge, Count: 1})
	r, _ := b.newRelay(t, relayOpts{})
	var id int64
	require.NoError(t, database.InTx(context.Background(), b.db.Pool, func(tx pgx.Tx) error {
		var err error
		id, err = outbox.Insert(context.Background(), tx, outbox.Message{
			Topic: kafkax.TopicTransactions, EventType: "payout.requested", PartitionKey: "payout-retry:p1",
			Payload: []byte(`{"payout_id":"p1","user_id":"user-1"}`),
			Headers: map[string]string{kafkax.HeaderEventType: "payout.requested", kafkax.HeaderUserKey: "user-1"},
		})
		return err
	}))
	_, err := r.Cycle(context.Background())
	require.NoError(t, err)
	st, _ := b.status(t, id)
	require.Equal(t, "dlq", st)
	var key string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT partition_key FROM dead_letters WHERE outbox_id = $1", id).Scan(&key))
	require.Equal(t, "user-1", key)
}
