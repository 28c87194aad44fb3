package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
)

// TestPayoutShowsStateHistoryDestinationAndAttempts: the page links a
// letter to its payout; the payout answer carries what the person deciding
// about the letter needs, to viewers too, and nothing for unknown ids.
func TestPayoutShowsStateHistoryDestinationAndAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	at := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	id := fixture.Payout{ClientID: "shop", Status: payoutstate.NeedsReview, Transitions: []fixture.Transition{
		{To: payoutstate.Initialized, At: at},
		{From: payoutstate.Initialized, To: payoutstate.Sending, Attempt: 1, At: at.Add(time.Second)},
		{From: payoutstate.Sending, To: payoutstate.NeedsReview, Attempt: 1, Error: "stripe 504: timed out", ErrorClass: "transient", At: at.Add(31 * time.Second)},
	}}.Insert(t, b.db.Pool)
	fixture.Attempt{PayoutID: id, Attempt: 1, Kind: "create", IdempotencyKey: "k", Outcome: "unknown",
		Error: "stripe 504: timed out", At: at.Add(31 * time.Second)}.Insert(t, b.db.Pool)

	a := get(t, b.url+"/v1/payouts/"+id, viewerToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, id, a.body["id"])
	require.Equal(t, "NEEDS_REVIEW", a.body["status"])
	require.Equal(t, "ba_1", a.body["destination"])
	require.Equal(t, "user-1", a.body["user_id"])
	require.EqualValues(t, 1500, a.body["amount"])
	transitions := a.body["transitions"].([]any)
	require.Len(t, transitions, 3)
	last := transitions[2].(map[string]any)
	require.Equal(t, "SENDING_TO_GATEWAY", last["from"])
	require.Equal(t, "NEEDS_REVIEW", last["to"])
	require.Equal(t, "2026-11-20T10:00:31Z", last["at"])
	require.Nil(t, transitions[0].(map[string]any)["from"])
	attempts := a.body["psp_attempts"].([]any)
	require.Len(t, attempts, 1)
	require.Equal(t, "unknown", attempts[0].(map[string]any)["outcome"])

	other := fixture.Payout{ClientID: "shop", Transitions: []fixture.Transition{}}.Insert(t, b.db.Pool)
	a = get(t, b.url+"/v1/payouts/"+other, operatorToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, []any{}, a.body["transitions"], "an empty history is a list, not null")
	require.Equal(t, []any{}, a.body["psp_attempts"])

	a = get(t, b.url+"/v1/payouts/00000000-0000-0000-0000-000000000000", viewerToken)
	require.Equal(t, http.StatusNotFound, a.status, a.raw)
	require.Equal(t, "not_found", a.body["error"].(map[string]any)["code"])
	a = get(t, b.url+"/v1/payouts/po-7f3a", viewerToken)
	require.Equal(t, http.StatusBadRequest, a.status, a.raw)
	require.Equal(t, http.StatusUnauthorized, get(t, b.url+"/v1/payouts/"+id, "").status)
	// dlq-admin only reads payouts.
	require.Equal(t, http.StatusMethodNotAllowed, call(t, http.MethodPost, b.url+"/v1/payouts/"+id, operatorToken, "{}").status)
}
