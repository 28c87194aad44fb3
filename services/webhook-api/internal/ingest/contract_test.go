package ingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
)

// With the grants webhook-api keeps after the next release's contract
// (payouts only through payouts_for_api, the ledger through its _for_api
// views), a payout's event without a user takes its payout's user's
// partition, and a refund its payment's wallet's.
func TestPartitionsWithTheGrantsLeftAfterTheContract(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	var payout string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT id::text FROM create_payout(gen_random_uuid(), 'acme', 'key-1',
		'hash', 'alice', 700, 'usd', 'acct_123', 'stripe', 'corr', NULL)`).Scan(&payout))
	fixture.Wallet{Owner: "bob", Balance: 500, Reference: "stripe:pi_1"}.Insert(t, db.Pool)
	db.AfterContract(t)

	store := ingest.NewStore(db.As(t, migrations.RoleWebhookAPI), noNotify{}, func() time.Time { return epoch })
	paid := ingest.Pending{
		Event: ingest.Normalized{Event: event.PSPEvent{
			Provider: ingest.Stripe, EventID: "evt_paid", Type: "payout.paid", Action: event.ActionPayoutPaid,
			Reference: "po_1", PayoutID: payout, Amount: 700, Currency: "usd", OccurredAt: epoch,
		}},
		Body: []byte(`{"id":"evt_paid"}`), CorrelationID: "corr-evt_paid",
	}
	got := store.SaveGroup(ctx, []ingest.Pending{paid, refund("evt_r1", "pi_1", "re_1", 0)})
	require.Equal(t, []ingest.Outcome{ingest.Accepted, ingest.Accepted}, outcomes(t, got))
	var paidKey, refundKey string
	require.NoError(t, db.Pool.QueryRow(ctx, `
		SELECT (SELECT partition_key FROM transaction_outbox WHERE payload->>'event_id' = 'evt_paid'),
		       (SELECT partition_key FROM transaction_outbox WHERE payload->>'event_id' = 'evt_r1')`).Scan(&paidKey, &refundKey))
	require.Equal(t, "alice", paidKey, "the payout's user")
	require.Equal(t, "bob", refundKey, "the wallet the payment was credited to")
}
