package deliver_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
)

// An operator replays the dead letter once the receiver is fixed: the
// event goes out again through the outbox, with the same event id, and is
// delivered.
func TestReplayedDeadLetterIsDeliveredWithTheSameEventID(t *testing.T) {
	t.Parallel()
	refused := refundPosted("frank", "re_replay")
	b := setup(t, func(id string, n int) int {
		if id == refused.EventID && n == 1 {
			return http.StatusGone // the receiver is broken at first
		}
		return http.StatusOK
	})
	b.publish(t, refused)
	ctx := context.Background()
	var letterID int64
	require.Eventually(t, func() bool {
		return b.db.Pool.QueryRow(ctx, `SELECT id FROM dead_letters WHERE original_topic = $1`, kafkax.TopicSettlements).Scan(&letterID) == nil
	}, waitFor, 20*time.Millisecond)

	rp := replay.New(b.db.Pool, store.New(b.db.Pool), lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	_, err := rp.Replay(ctx, letterID, "ops-alice", "receiver fixed")
	require.NoError(t, err)

	// The relay's part: publish the outbox row as it is.
	var key, payload string
	var headersJSON []byte
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT partition_key, payload::text, headers FROM transaction_outbox
		WHERE topic = $1`, kafkax.TopicSettlements).Scan(&key, &payload, &headersJSON))
	headers := map[string]string{}
	require.NoError(t, json.Unmarshal(headersJSON, &headers))
	r := &kgo.Record{Topic: kafkax.TopicSettlements, Key: []byte(key), Value: []byte(payload)}
	for k, v := range headers {
		kafkax.SetHeader(r, k, v)
	}
	pctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	require.NoError(t, kafkatest.NewClient(t, b.cluster).ProduceSync(pctx, r).FirstErr())

	b.rc.waitAccepted(t, refused.EventID)
	got := b.rc.requests()
	require.Len(t, got, 2, "refused once, delivered once")
	require.Equal(t, got[0].eventID, got[1].eventID)
	require.NoError(t, got[1].verified)
	require.JSONEq(t, string(got[0].body), string(got[1].body))
	var status string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT status FROM dead_letters WHERE id = $1`, letterID).Scan(&status))
	require.Equal(t, "replayed", status)
}
