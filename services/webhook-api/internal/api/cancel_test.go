package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/event/schema"
)

func cancel(t *testing.T, url, token, id string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/payouts/"+id+"/cancel", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	return do(t, req)
}

// A payout nobody has taken up is canceled: FINALIZED with class canceled,
// its history and its outcome event recorded, once; once the worker has
// taken a payout up, a cancel is refused and changes nothing.
func TestCancelOnlyBeforeTheWorkerTakesThePayoutUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	register(t, b.url, clientToken, "user-1", "stripe", "acct_123")
	id := payoutRequest(t, b.url, clientToken, "key-1", payoutBody).body["payout_id"].(string)

	a := cancel(t, b.url, clientToken, id)
	require.Equal(t, 200, a.status, a.body)
	require.Equal(t, "FINALIZED", a.body["status"])
	require.Equal(t, "canceled", a.body["error_class"])
	require.Contains(t, a.body["last_error"], "canceled by client acme")
	var steps []string
	for _, h := range a.body["history"].([]any) {
		steps = append(steps, h.(map[string]any)["to"].(string))
	}
	require.Equal(t, []string{"INITIALIZED", "FAILED", "FINALIZED"}, steps)

	again := cancel(t, b.url, clientToken, id)
	require.Equal(t, 200, again.status, "a repeated cancel answers the same payout")
	require.Equal(t, 1, count(t, b.db, `SELECT count(*) FROM transaction_outbox WHERE topic = 'aegis.settlements'
		AND event_type = 'payout.canceled' AND payload->>'payout_id' = $1`, id))
	require.Equal(t, 3, count(t, b.db, `SELECT count(*) FROM payout_transitions WHERE payout_id = $1`, id))
	var outcome string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT payload::text FROM transaction_outbox
		WHERE topic = 'aegis.settlements' AND payload->>'payout_id' = $1`, id).Scan(&outcome))
	v, err := schema.NewSettlements()
	require.NoError(t, err)
	require.NoError(t, v.Validate([]byte(outcome)), "payout.canceled matches its schema: %s", outcome)

	// Taken up by the worker (hold taken, PSP possibly called): 409.
	sent := payoutRequest(t, b.url, clientToken, "key-2", payoutBody).body["payout_id"].(string)
	_, err = b.db.Pool.Exec(context.Background(), `UPDATE payouts SET status = 'SENDING_TO_GATEWAY' WHERE id = $1`, sent)
	require.NoError(t, err)
	refused := cancel(t, b.url, clientToken, sent)
	require.Equal(t, 409, refused.status)
	require.Equal(t, "payout_not_cancelable", refused.errorCode())
	require.Equal(t, 1, count(t, b.db, `SELECT count(*) FROM payouts WHERE id = $1 AND status = 'SENDING_TO_GATEWAY'`, sent))
	require.Zero(t, count(t, b.db, `SELECT count(*) FROM transaction_outbox WHERE topic = 'aegis.settlements' AND payload->>'payout_id' = $1`, sent))

	// A canceled payout cannot be canceled by a client outside its user's scope,
	// nor can one that does not exist.
	register(t, b.url, clientToken, "alice", "stripe", "acct_456")
	alices := payoutRequest(t, b.url, clientToken, "key-3", `{"user_id":"alice","amount":1500,"currency":"usd","provider":"stripe","destination":"acct_456"}`)
	require.Equal(t, 202, alices.status, alices.body)
	outside := cancel(t, b.url, otherToken, alices.body["payout_id"].(string))
	require.Equal(t, 403, outside.status)
	require.Equal(t, 1, count(t, b.db, `SELECT count(*) FROM payouts WHERE id = $1 AND status = 'INITIALIZED'`, alices.body["payout_id"]))
	require.Equal(t, 404, cancel(t, b.url, clientToken, "01930000-0000-7000-8000-000000000000").status)
	require.Equal(t, 404, cancel(t, b.url, clientToken, "not-a-uuid").status)
}
