package ingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
)

func refund(eventID, payment, refundID string, at time.Duration) ingest.Pending {
	return ingest.Pending{
		Event: ingest.Normalized{Event: event.PSPEvent{
			Provider: ingest.Stripe, EventID: eventID, Type: "refund.created", Action: event.ActionRefund,
			Reference: payment, OccurredAt: epoch.Add(at),
			Returns: []event.Return{{ID: refundID, Amount: 100, Currency: "usd", Outcome: event.OutcomeRefunded}},
		}},
		Body: []byte(`{"id":"` + eventID + `"}`), CorrelationID: "corr-" + eventID,
	}
}

// A refund shares its payment's wallet partition (the wallet the ledger
// credited), and is never judged stale against the payment's other events:
// a payment has many refunds and disputes, each ordered by the worker.
func TestRefundTakesItsPaymentsWalletPartitionAndIsNeverStale(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	fixture.Wallet{Owner: "alice", Balance: 500, Reference: "stripe:pi_1"}.Insert(t, db.Pool)
	store := ingest.NewStore(db.Pool, noNotify{}, time.Now)
	got := store.SaveGroup(ctx, []ingest.Pending{
		credit("evt_late", "pi_1", time.Hour), // the newest event about pi_1
		refund("evt_r1", "pi_1", "re_1", 0),
		refund("evt_r2", "pi_unknown", "re_2", 0),
	})
	require.Equal(t, []ingest.Outcome{ingest.Accepted, ingest.Accepted, ingest.Accepted}, outcomes(t, got))
	var key1, key2 string
	require.NoError(t, db.Pool.QueryRow(ctx, `
		SELECT (SELECT partition_key FROM transaction_outbox WHERE payload->>'event_id' = 'evt_r1'),
		       (SELECT partition_key FROM transaction_outbox WHERE payload->>'event_id' = 'evt_r2')`).Scan(&key1, &key2))
	require.Equal(t, "alice", key1)
	require.Equal(t, "stripe:pi_unknown", key2, "no credit yet: keyed by the payment")
	var stale int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM transaction_outbox WHERE (payload->>'stale')::boolean`).Scan(&stale))
	require.Zero(t, stale)
}
