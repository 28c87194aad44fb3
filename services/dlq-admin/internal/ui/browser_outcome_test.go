package ui_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// TestNoopReplayIsNotShownAsASuccess: replaying the letter of a payout that
// is already FINALIZED publishes nothing, and the page says so in the
// no-op colour, never the success one (issue 14).
func TestNoopReplayIsNotShownAsASuccess(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx0 := context.Background()
	var payoutID string
	require.NoError(t, db.Pool.QueryRow(ctx0, `
		INSERT INTO payouts (id, client_id, idempotency_key, request_hash, user_id, amount, currency, destination, provider, status)
		VALUES (gen_random_uuid(), 'shop', 'k1', 'h', 'alice', 1500, 'usd', 'ba_1', 'stripe', 'FINALIZED')
		RETURNING id::text`).Scan(&payoutID))
	p, o := int32(0), int64(1)
	id, _, err := dlq.Insert(ctx0, db.Pool, dlq.Letter{
		Source: dlq.SourceConsumer, OriginalTopic: kafkax.TopicTransactions, OriginalPartition: &p, OriginalOffset: &o,
		ConsumerGroup: "payout-worker", PartitionKey: "alice", EventType: "payout.requested",
		Payload: fmt.Appendf(nil, `{"payout_id":%q,"user_id":"alice","amount":1500,"currency":"usd"}`, payoutID),
		Error:   "stripe 400 account_invalid", ErrorClass: "permanent",
	})
	require.NoError(t, err)
	url := serve(t, db)
	ctx := browser(t)

	do(t, ctx, chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#token"), operatorToken), chromedp.Click(chromedp.CSS("#token-save")))
	row := fmt.Sprintf(`#letters tr[data-id="%d"]`, id)
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS(row)), chromedp.Click(chromedp.CSS(row)))
	until(t, ctx, "detail", fmt.Sprintf(`document.getElementById('detail-title').textContent === 'Dead letter #%d'`, id))
	do(t, ctx, chromedp.Click(chromedp.CSS("#replay-btn")))
	until(t, ctx, "replay answer", `document.getElementById('action-result').textContent.startsWith('202')`)
	result := text(t, ctx, "#action-result")
	require.Contains(t, result, "no-op")
	require.Contains(t, result, "payout "+payoutID+" is already FINALIZED")
	class, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('action-result').className`))
	require.NoError(t, err)
	require.Equal(t, "result noop", class)
	until(t, ctx, "outcome in the detail", `document.getElementById('detail-fields').textContent.includes('is already FINALIZED')`)

	var outbox int
	require.NoError(t, db.Pool.QueryRow(ctx0, `SELECT count(*) FROM transaction_outbox`).Scan(&outbox))
	require.Zero(t, outbox, "a no-op publishes nothing")
}
