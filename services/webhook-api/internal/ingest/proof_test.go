package ingest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
)

// Every money event webhook-api writes to the outbox carries the proof the
// worker requires, valid for the payload as it leaves Postgres (jsonb), on
// the one round trip path (credits) and the two round trip path (refunds,
// stale credits); an event that moves no money carries none.
func TestMoneyEventsLeaveWithWebhookAPIsProof(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	keys, err := eventproof.New("test-event-signing-key-0123456789abcdef", "")
	require.NoError(t, err)
	store := ingest.NewStore(db.Pool, noNotify{}, time.Now).WithProof(keys)

	none := credit("evt_none", "pi_9", 0)
	none.Event.Event.Action, none.Event.Event.Type = event.ActionNone, "customer.created"
	for _, group := range [][]ingest.Pending{
		{credit("evt_c1", "pi_1", time.Hour), none},
		{refund("evt_r1", "pi_1", "re_1", 0), credit("evt_c0", "pi_1", 0)}, // the second is stale
	} {
		for _, s := range store.SaveGroup(ctx, group) {
			require.NoError(t, s.Err)
		}
	}
	rows, err := db.Pool.Query(ctx, `SELECT payload, headers FROM transaction_outbox ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	signed := 0
	for rows.Next() {
		var payload []byte
		var headers map[string]string
		require.NoError(t, rows.Scan(&payload, &headers))
		var e event.PSPEvent
		require.NoError(t, json.Unmarshal(payload, &e))
		if e.Action == event.ActionNone {
			require.Empty(t, headers[eventproof.Header], e.EventID)
			continue
		}
		require.NoError(t, keys.Verify(e, headers[eventproof.Header]), e.EventID)
		signed++
		if e.EventID == "evt_c0" {
			require.True(t, e.Stale, "the proof covers the stale flag as published")
		}
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 3, signed)
}
