package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/fixture"
)

// An operator requests a PSP reconciliation run: 202 with the run; while
// it is requested or running (webhook-api works it) another request is a
// 409 and writes nothing; a viewer reads runs but cannot request one.
func TestPSPReconciliationIsRequestedOnceAtATime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	latest := b.url + "/v1/psp-reconciliation"

	a := get(t, latest, viewerToken)
	require.Equal(t, http.StatusNotFound, a.status, a.raw)
	require.Equal(t, "not_found", a.errorCode())
	a = call(t, http.MethodPost, latest, viewerToken, "")
	require.Equal(t, http.StatusForbidden, a.status, a.raw)

	a = call(t, http.MethodPost, latest, operatorToken, "")
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, "requested", a.body["status"])
	require.Equal(t, "manual", a.body["trigger"])
	require.Equal(t, "bob", a.body["requested_by"])
	id := int64(a.body["run_id"].(float64))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE actor = 'bob' AND action = 'psp_reconcile' AND target_id = $1`, fmt.Sprint(id)))
	// Its River job, queued in the same transaction for webhook-api.
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'psp_reconcile' AND queue = 'psp_reconcile'
		AND state = 'available' AND (args->>'run_id')::bigint = $1`, id))

	a = call(t, http.MethodPost, latest, operatorToken, "")
	require.Equal(t, http.StatusConflict, a.status, a.raw)
	require.Equal(t, "conflict", a.errorCode())
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM river_job`), "a refused request queues no job")

	// webhook-api works it: still one at a time.
	_, err := b.db.Pool.Exec(context.Background(),
		`UPDATE psp_reconciliation_runs SET status = 'running', started_at = now(), locked_by = 'river-1-1-w' WHERE id = $1`, id)
	require.NoError(t, err)
	a = call(t, http.MethodPost, latest, operatorToken, "")
	require.Equal(t, http.StatusConflict, a.status, a.raw)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM psp_reconciliation_runs`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log`), "a refused request is not audited")

	a = get(t, fmt.Sprintf("%s/%d", latest, id), viewerToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, "running", a.body["status"])
	require.Equal(t, http.StatusNotFound, get(t, latest+"/999999", viewerToken).status)
	require.Equal(t, http.StatusBadRequest, get(t, latest+"/x", viewerToken).status)

	// Finished: the next request is taken.
	_, err = b.db.Pool.Exec(context.Background(), `
		UPDATE psp_reconciliation_runs SET status = 'succeeded', finished_at = now(), events_found = 3, events_recovered = 1,
		       events_present = 2, disagreement_count = 1, disagreements_open = 1,
		       disagreements = '[{"provider":"stripe","kind":"paid_at_psp_not_succeeded","payout_id":"p1","detail":"x","state":"still_open"}]'
		WHERE id = $1`, id)
	require.NoError(t, err)
	a = get(t, latest, viewerToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, []any{}, a.body["open_disagreements"], "none open yet: listed empty")
	fixture.Disagreement{Kind: "paid_at_psp_not_succeeded", PayoutID: "p1", Detail: "x", FirstSeenRun: id}.Insert(t, b.db.Pool)
	a = get(t, latest, viewerToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, float64(1), a.body["events_recovered"])
	require.Len(t, a.body["disagreements"], 1)
	require.Equal(t, float64(1), a.body["disagreements_still_open"])
	require.Equal(t, float64(0), a.body["disagreements_new"])
	open := a.body["open_disagreements"].([]any)
	require.Len(t, open, 1, "the open ones stay visible")
	require.Equal(t, "p1", open[0].(map[string]any)["payout_id"])
	require.Equal(t, float64(id), open[0].(map[string]any)["first_seen_run"])
	a = call(t, http.MethodPost, latest, operatorToken, "")
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	next := int64(a.body["run_id"].(float64))
	require.Greater(t, next, id)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'psp_reconcile' AND (args->>'run_id')::bigint = $1`, next))
}
