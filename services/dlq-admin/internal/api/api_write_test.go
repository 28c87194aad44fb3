package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/kafkax"
)

func (b bundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

func TestWritesNeedAnOperatorToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.seed(t)[0]
	writes := []struct{ path, body string }{
		{fmt.Sprintf("/v1/dead-letters/%d/replay", id), ""},
		{fmt.Sprintf("/v1/dead-letters/%d/discard", id), `{"reason":"x"}`},
		{"/v1/dead-letters/replay", `{"max":10}`},
		{"/v1/replay-jobs/1/cancel", ""},
		{"/v1/reconciliation", ""},
	}
	for _, w := range writes {
		a := call(t, http.MethodPost, b.url+w.path, "", w.body)
		require.Equal(t, http.StatusUnauthorized, a.status, w.path)
		require.Equal(t, "unauthorized", a.errorCode())
		a = call(t, http.MethodPost, b.url+w.path, viewerToken, w.body)
		require.Equal(t, http.StatusForbidden, a.status, w.path)
		require.Equal(t, "forbidden", a.errorCode())
	}
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'open'`, id))
	require.Zero(t, b.count(t, `SELECT count(*) FROM transaction_outbox`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM audit_log`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM replay_jobs`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM reconciliation_runs`))
	for _, p := range []string{"/v1/replay-jobs", "/v1/replay-jobs/1", "/v1/reconciliation"} {
		require.Equal(t, http.StatusUnauthorized, get(t, b.url+p, "").status, p)
	}
}

func TestReplayAndDiscardAnswerAsTheContractSays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.seed(t)
	replayURL := func(i int64) string { return fmt.Sprintf("%s/v1/dead-letters/%d/replay", b.url, i) }
	discardURL := func(i int64) string { return fmt.Sprintf("%s/v1/dead-letters/%d/discard", b.url, i) }

	a := call(t, http.MethodPost, replayURL(id[0]), operatorToken, `{"reason":"account fixed"}`)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	outboxID := a.body["outbox_id"].(float64)
	require.Positive(t, outboxID)
	dl := a.body["dead_letter"].(map[string]any)
	require.Equal(t, "replayed", dl["status"])
	require.Equal(t, "bob", dl["resolved_by"], "the operator token's name")
	require.Equal(t, "account fixed", dl["resolution_reason"])
	require.Equal(t, float64(1), dl["replay_count"])
	require.Equal(t, outboxID, dl["replay_outbox_id"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM transaction_outbox WHERE id = $1 AND topic = $2 AND headers->>'replay_of' = $3`,
		int64(outboxID), kafkax.TopicTransactions, fmt.Sprint(id[0])))

	// Twice: 409, and nothing more is written.
	a = call(t, http.MethodPost, replayURL(id[0]), operatorToken, "")
	require.Equal(t, http.StatusConflict, a.status, a.raw)
	require.Equal(t, "conflict", a.errorCode())
	require.Contains(t, a.errorMessage(), "replayed")
	a = call(t, http.MethodPost, discardURL(id[0]), operatorToken, `{"reason":"oops"}`)
	require.Equal(t, http.StatusConflict, a.status, a.raw)
	// id[2] was discarded by the fixture.
	a = call(t, http.MethodPost, replayURL(id[2]), operatorToken, "")
	require.Equal(t, http.StatusConflict, a.status, a.raw)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM transaction_outbox`))

	// Discard: a reason is required.
	for _, body := range []string{"", "{}", `{"reason":"  "}`} {
		a = call(t, http.MethodPost, discardURL(id[1]), operatorToken, body)
		require.Equal(t, http.StatusBadRequest, a.status, body)
		require.Equal(t, "invalid_request", a.errorCode())
	}
	a = call(t, http.MethodPost, discardURL(id[1]), operatorToken, `{"reason":"duplicate event"}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	dl = a.body["dead_letter"].(map[string]any)
	require.Equal(t, "discarded", dl["status"])
	require.Equal(t, "duplicate event", dl["resolution_reason"])
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM audit_log WHERE actor = 'bob' AND target_type = 'dead_letter'`))

	// Bad requests: unknown letter, bad id, unknown field, wrong type.
	cases := []struct {
		url, body string
		status    int
		code      string
	}{
		{replayURL(id[4] + 100), "", 404, "not_found"},
		{discardURL(id[4] + 100), `{"reason":"x"}`, 404, "not_found"},
		{b.url + "/v1/dead-letters/abc/replay", "", 400, "invalid_request"},
		{replayURL(id[3]), `{"reason":"x","force":true}`, 400, "invalid_request"},
		{replayURL(id[3]), `{"reason":5}`, 400, "invalid_request"},
		{replayURL(id[3]), `[1,2]`, 400, "invalid_request"},
		{discardURL(id[3]), `{"reason":"` + strings.Repeat("x", 2001) + `"}`, 400, "invalid_request"},
	}
	for _, tc := range cases {
		a = call(t, http.MethodPost, tc.url, operatorToken, tc.body)
		require.Equal(t, tc.status, a.status, "%s %s: %s", tc.url, tc.body, a.raw)
		require.Equal(t, tc.code, a.errorCode())
	}
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM transaction_outbox`))
}

func TestPoisonReplayIs422(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := insert(t, b.db, kafkax.TopicTransactions, "poison", 1, t0, []byte("\xffnot json"), nil)
	a := call(t, http.MethodPost, fmt.Sprintf("%s/v1/dead-letters/%d/replay", b.url, id), operatorToken, "")
	require.Equal(t, http.StatusUnprocessableEntity, a.status, a.raw)
	require.Equal(t, "not_replayable", a.errorCode())
	require.Contains(t, a.errorMessage(), "not JSON")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'open'`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM transaction_outbox`))
}

func TestBulkReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.seed(t)
	bulk := func(body string) answer {
		return call(t, http.MethodPost, b.url+"/v1/dead-letters/replay", operatorToken, body)
	}

	// Dry run: what would be replayed, oldest first; nothing changes.
	a := bulk(`{"topic":"aegis.transactions","status":"open","dry_run":true,"max":1}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.JSONEq(t, fmt.Sprintf(`{"dry_run":true,"matched":2,"would_replay":1,"ids":[%d]}`, id[0]), a.raw)
	a = bulk(`{"error_class":"permanent","since":"2026-11-20T10:30:00Z","dry_run":true,"max":10}`)
	require.JSONEq(t, fmt.Sprintf(`{"dry_run":true,"matched":2,"would_replay":2,"ids":[%d,%d]}`, id[3], id[4]), a.raw)
	require.Zero(t, b.count(t, `SELECT count(*) FROM transaction_outbox`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM replay_jobs`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM audit_log`))

	for body, param := range map[string]string{
		`{"dry_run":true}`:              "max",
		`{"max":0}`:                     "max",
		`{"max":10001}`:                 "max",
		`{"max":1,"status":"replayed"}`: "status",
		`{"max":1,"since":"yesterday"}`: "since",
		`{"max":1,"dry-run":true}`:      "dry-run",
		`{"max":"ten"}`:                 "max",
		`{"max":1,"until":"2026-01-01T00:00:00Z","since":"2026-02-01T00:00:00Z"}`: "until",
	} {
		a := bulk(body)
		require.Equal(t, http.StatusBadRequest, a.status, body)
		require.Equal(t, "invalid_request", a.errorCode())
		require.Contains(t, a.errorMessage(), param, body)
	}

	// For real: a job, queued (no runner in this test), audited.
	a = bulk(`{"topic":"aegis.transactions","max":5,"reason":"psp back"}`)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	jobID := int64(a.body["id"].(float64))
	require.Equal(t, "queued", a.body["status"])
	require.Equal(t, "bob", a.body["actor"])
	require.Equal(t, "psp back", a.body["reason"])
	require.Equal(t, map[string]any{"topic": "aegis.transactions", "status": "open"}, a.body["filter"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'bulk_replay' AND actor = 'bob' AND target_id = $1`, fmt.Sprint(jobID)))

	g := get(t, fmt.Sprintf("%s/v1/replay-jobs/%d", b.url, jobID), viewerToken)
	require.Equal(t, http.StatusOK, g.status, g.raw)
	require.Equal(t, float64(5), g.body["max"])
	for _, k := range []string{"matched", "replayed", "skipped", "failed", "created_at", "started_at", "finished_at", "last_error"} {
		require.Contains(t, g.body, k)
	}
	l := get(t, b.url+"/v1/replay-jobs", viewerToken)
	require.Equal(t, http.StatusOK, l.status)
	require.Len(t, l.body["items"], 1)
	require.Equal(t, http.StatusNotFound, get(t, fmt.Sprintf("%s/v1/replay-jobs/%d", b.url, jobID+1), viewerToken).status)
	require.Equal(t, http.StatusBadRequest, get(t, b.url+"/v1/replay-jobs?limit=0", viewerToken).status)

	c := call(t, http.MethodPost, fmt.Sprintf("%s/v1/replay-jobs/%d/cancel", b.url, jobID), operatorToken, "")
	require.Equal(t, http.StatusOK, c.status, c.raw)
	require.Equal(t, "cancelled", c.body["status"])
	c = call(t, http.MethodPost, fmt.Sprintf("%s/v1/replay-jobs/%d/cancel", b.url, jobID), operatorToken, "")
	require.Equal(t, http.StatusConflict, c.status, c.raw)
	require.Zero(t, b.count(t, `SELECT count(*) FROM transaction_outbox`))
}

func TestReconciliationRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := get(t, b.url+"/v1/reconciliation", viewerToken)
	require.Equal(t, http.StatusNotFound, a.status, a.raw)
	require.Equal(t, "not_found", a.errorCode())

	a = call(t, http.MethodPost, b.url+"/v1/reconciliation", operatorToken, "")
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, true, a.body["ok"])
	require.Equal(t, "manual", a.body["trigger"])
	require.Equal(t, "bob", a.body["actor"])
	runID := a.body["id"]

	a = get(t, b.url+"/v1/reconciliation", viewerToken)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, runID, a.body["id"])
	sum := a.body["summary"].(map[string]any)
	require.Equal(t, []any{}, sum["wallets"])
	require.Equal(t, float64(0), sum["wallet_mismatches"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'reconcile' AND actor = 'bob'`))

	// While a check runs (it holds the check's lock), another answers 409.
	ctx := context.Background()
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock(1701002, 1)`)
	require.NoError(t, err)
	a = call(t, http.MethodPost, b.url+"/v1/reconciliation", operatorToken, "")
	require.Equal(t, http.StatusConflict, a.status, a.raw)
	require.Equal(t, "conflict", a.errorCode())
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM reconciliation_runs`))
}
