package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// payout stores a payout in status for user-1 and returns its id.
func (b bundle) payout(t *testing.T, status string) string {
	t.Helper()
	var id string
	err := b.db.Pool.QueryRow(context.Background(), `
		INSERT INTO payouts (id, client_id, idempotency_key, request_hash, user_id, amount, currency, destination, provider, status)
		VALUES (gen_random_uuid(), 'shop', gen_random_uuid()::text, 'h', 'user-1', 1500, 'usd', 'ba_1', 'stripe', $1)
		RETURNING id::text`, status).Scan(&id)
	require.NoError(t, err)
	return id
}

func commandPayload(payoutID string) []byte {
	return fmt.Appendf(nil, `{"payout_id":%q,"user_id":"user-1","amount":1500,"currency":"usd","provider":"stripe","attempt":0}`, payoutID)
}

func TestReplayAnswerAndDetailSayWhatTheReplayDid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	finalized := b.payout(t, "FINALIZED")
	noop := insert(t, b.db, kafkax.TopicTransactions, "permanent", 1, t0, commandPayload(finalized), nil)
	again := insert(t, b.db, kafkax.TopicTransactions, "transient", 2, t0, commandPayload(b.payout(t, "RETRYING")), nil)
	poison := insert(t, b.db, kafkax.TopicTransactions, "poison", 3, t0, []byte("\x00\x01"), nil)
	detail := func(id int64) answer {
		a := get(t, fmt.Sprintf("%s/v1/dead-letters/%d", b.url, id), operatorToken)
		require.Equal(t, http.StatusOK, a.status, a.raw)
		return a
	}

	// Before: open, replayable (or not, and why), no replay yet.
	d := detail(noop)
	require.Nil(t, d.body["replay"])
	require.Equal(t, true, d.body["replayable"])
	require.Nil(t, d.body["not_replayable_reason"])
	d = detail(poison)
	require.Equal(t, false, d.body["replayable"])
	require.Contains(t, d.body["not_replayable_reason"], "not JSON")

	// The payout is FINALIZED: nothing is published, and the answer says so.
	a := call(t, http.MethodPost, fmt.Sprintf("%s/v1/dead-letters/%d/replay", b.url, noop), operatorToken, "")
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, "noop", a.body["outcome"])
	require.Nil(t, a.body["outbox_id"])
	require.Equal(t, "FINALIZED", a.body["subject_state"])
	require.Contains(t, a.body["message"], "nothing published: payout "+finalized+" is already FINALIZED")
	require.Equal(t, "replayed", a.body["dead_letter"].(map[string]any)["status"])
	require.Zero(t, b.count(t, `SELECT count(*) FROM transaction_outbox`))
	rp := detail(noop).body["replay"].(map[string]any)
	require.Equal(t, "noop", rp["outcome"])
	require.Equal(t, "FINALIZED", rp["subject_state"])
	require.Nil(t, rp["outbox_id"])

	// A retrying payout: republished.
	a = call(t, http.MethodPost, fmt.Sprintf("%s/v1/dead-letters/%d/replay", b.url, again), operatorToken, "")
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, "republished", a.body["outcome"])
	require.NotNil(t, a.body["outbox_id"])
	require.Nil(t, a.body["subject_state"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM transaction_outbox WHERE id = $1`, int64(a.body["outbox_id"].(float64))))
	d = detail(again)
	rp = d.body["replay"].(map[string]any)
	require.Equal(t, "republished", rp["outcome"])
	require.Equal(t, a.body["outbox_id"], rp["outbox_id"])
	require.Equal(t, []any{}, d.body["failed_again_as"])

	// It fails again: the new letter carries replay_of, and the detail of
	// the replayed one names it.
	failed := insert(t, b.db, kafkax.TopicTransactions, "transient", 4, t0, commandPayload("x"),
		map[string]string{"replay_of": fmt.Sprint(again)})
	require.Equal(t, []any{float64(failed)}, detail(again).body["failed_again_as"])

	// The list shows outcomes too.
	l := get(t, b.url+"/v1/dead-letters?status=replayed", viewerToken)
	require.Equal(t, http.StatusOK, l.status, l.raw)
	outcomes := map[int64]string{}
	for _, it := range l.body["items"].([]any) {
		m := it.(map[string]any)
		outcomes[int64(m["id"].(float64))] = m["replay"].(map[string]any)["outcome"].(string)
	}
	require.Equal(t, map[int64]string{noop: "noop", again: "republished"}, outcomes)
}
