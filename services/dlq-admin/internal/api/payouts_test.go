package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPayoutShowsStateHistoryDestinationAndAttempts: the page links a
// letter to its payout; the payout answer carries what the person deciding
// about the letter needs, to viewers too, and nothing for unknown ids.
func TestPayoutShowsStateHistoryDestinationAndAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.payout(t, "NEEDS_REVIEW")
	_, err := b.db.Pool.Exec(ctx, `
		INSERT INTO payout_transitions (payout_id, from_status, to_status, attempt, error, error_class, at) VALUES
		($1, NULL, 'INITIALIZED', 0, NULL, NULL, '2026-11-20T10:00:00Z'),
		($1, 'INITIALIZED', 'SENDING_TO_GATEWAY', 1, NULL, NULL, '2026-11-20T10:00:01Z'),
		($1, 'SENDING_TO_GATEWAY', 'NEEDS_REVIEW', 1, 'stripe 504: timed out', 'transient', '2026-11-20T10:00:31Z')`, id)
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, `
		INSERT INTO payout_attempts (payout_id, attempt, kind, idempotency_key, outcome, psp_reference, error, at)
		VALUES ($1, 1, 'create', 'k', 'unknown', NULL, 'stripe 504: timed out', '2026-11-20T10:00:31Z')`, id)
	require.NoError(t, err)

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

	other := b.payout(t, "INITIALIZED")
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
