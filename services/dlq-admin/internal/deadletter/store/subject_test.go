package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
)

// TestEveryPayloadIsStoredWithASubject: the subject is computed by
// Postgres as a letter is written; no payload, however malformed, may make
// that write fail (one bad message never stops the others).
func TestEveryPayloadIsStoredWithASubject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	amount := int64(1500)
	cases := []struct {
		name    string
		payload []byte
		want    store.Subject
	}{
		{"payout command", []byte(`{"payout_id":"p-1","user_id":"u","amount":1500,"currency":"usd","provider":"stripe"}`),
			store.Subject{PayoutID: "p-1", UserID: "u", Amount: &amount, Currency: "usd", Provider: "stripe"}},
		{"psp event", []byte(`{"provider":"paystack","event_id":"e-1","type":"transfer.failed","payout_id":"p-2"}`),
			store.Subject{Provider: "paystack", EventID: "e-1", Type: "transfer.failed", PayoutID: "p-2"}},
		{"amount not a number", []byte(`{"payout_id":"p-3","amount":"15.00"}`), store.Subject{PayoutID: "p-3"}},
		{"nulls", []byte(`{"payout_id":null,"user_id":null}`), store.Subject{}},
		{"json array", []byte(`[{"payout_id":"p-4"}]`), store.Subject{}},
		{"json scalar", []byte(`42`), store.Subject{}},
		{"not json", []byte(`payout_id=p-5`), store.Subject{}},
		{"invalid utf-8", []byte("{\"payout_id\":\"\xff\xfe\"}"), store.Subject{}},
		{"nul byte", []byte("{\"payout_id\":\"a\x00b\"}"), store.Subject{}},
		{"empty", []byte{}, store.Subject{}},
		{"big", []byte(`{"payout_id":"p-6","pad":"` + strings.Repeat("x", 1<<20) + `"}`), store.Subject{PayoutID: "p-6"}},
	}
	for i, tc := range cases {
		p, off := int32(0), int64(i)
		id, ok, err := dlq.Insert(ctx, b.db.Pool, dlq.Letter{Source: dlq.SourceConsumer, OriginalTopic: kafkax.TopicTransactions,
			OriginalPartition: &p, OriginalOffset: &off, Payload: tc.payload, Error: "x", ErrorClass: "poison"})
		require.NoError(t, err, tc.name)
		require.True(t, ok, tc.name)
		d, err := b.store.Get(ctx, id)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, d.Subject, tc.name)
	}
}
