package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

const secondOperatorToken = "carol-operator-token-0123456789"

func (b bundle) payoutAt(t *testing.T, status string, created time.Time) string {
	t.Helper()
	return fixture.Payout{ClientID: "shop", Status: payoutstate.Status(status), CreatedAt: created}.Insert(t, b.db.Pool)
}

// NEEDS_REVIEW first, then oldest first, in pages; each row says why it is
// in review and links its latest dead letter.
func TestPayoutsListNeedsReviewFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	older := b.payoutAt(t, "SUCCEEDED", t0)
	review2 := b.payoutAt(t, "NEEDS_REVIEW", t0.Add(2*time.Minute))
	review1 := b.payoutAt(t, "NEEDS_REVIEW", t0.Add(time.Minute))
	newer := b.payoutAt(t, "FINALIZED", t0.Add(3*time.Minute))
	_, err := b.db.Pool.Exec(context.Background(), `UPDATE payouts SET last_error = 'psp_missing: the PSP has no object' WHERE id = $1`, review1)
	require.NoError(t, err)
	letter := insert(t, b.db, "aegis.transactions", "psp_missing", 1, t0, commandPayload(review1), nil)

	var ids []string
	cursor := ""
	for range 4 {
		a := get(t, b.url+"/v1/payouts?limit=1&cursor="+cursor, viewerToken)
		require.Equal(t, http.StatusOK, a.status, a.raw)
		items := a.body["items"].([]any)
		require.Len(t, items, 1)
		ids = append(ids, items[0].(map[string]any)["id"].(string))
		if len(ids) == 1 {
			p := items[0].(map[string]any)
			require.Equal(t, "psp_missing: the PSP has no object", p["last_error"])
			require.EqualValues(t, letter, p["dead_letter_id"])
			require.Equal(t, fmt.Sprintf("/v1/dead-letters/%d", letter), p["dead_letter"])
			require.Equal(t, "user-1", p["user_id"])
			require.EqualValues(t, 1500, p["amount"])
			require.Equal(t, "stripe", p["provider"])
		}
		cursor, _ = a.body["next_cursor"].(string)
	}
	require.Equal(t, []string{review1, review2, older, newer}, ids)
	require.Empty(t, cursor, "the last page has no next cursor")

	a := get(t, b.url+"/v1/payouts?status=NEEDS_REVIEW", viewerToken)
	require.Len(t, a.body["items"], 2)
	for _, q := range []string{"status=needs_review", "limit=0", "cursor=nope"} {
		a := get(t, b.url+"/v1/payouts?"+q, viewerToken)
		require.Equal(t, http.StatusBadRequest, a.status, q)
		require.Equal(t, "invalid_request", a.errorCode())
	}
}

// An operator's resolution: bad input answers 400 in the contract's shape
// and writes nothing; a payout not in review 409; a good one is recorded,
// audited and sent through the outbox on aegis.transactions keyed by the
// user id, in one transaction; its status is readable.
func TestResolveRecordsAuditsAndSendsTheCommand(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.payout(t, "NEEDS_REVIEW")
	resolve := func(token, payout, body string) answer {
		return call(t, http.MethodPost, b.url+"/v1/payouts/"+payout+"/resolve", token, body)
	}
	for body, param := range map[string]string{
		``: "body",
		`{"outcome":"paid","psp_object_id":"po_1"}`:                             "reason",
		`{"outcome":"paid","reason":"  ","psp_object_id":"po_1"}`:               "reason",
		`{"outcome":"failed","reason":"checked"}`:                               "psp_object_id",
		`{"outcome":"refunded","reason":"checked","psp_object_id":"po_1"}`:      "outcome",
		`{"outcome":"paid","reason":"checked","psp_object_id":"po 1; drop"}`:    "psp_object_id",
		`{"outcome":"paid","reason":"checked","psp_object_id":"po_1","x":true}`: "x",
	} {
		a := resolve(operatorToken, id, body)
		require.Equal(t, http.StatusBadRequest, a.status, body)
		require.Equal(t, "invalid_request", a.errorCode(), body)
		require.Contains(t, a.errorMessage(), param, body)
	}
	good := `{"outcome":"failed","reason":"Stripe dashboard: payout failed, account closed","psp_object_id":"po_1Abc"}`
	require.Equal(t, http.StatusForbidden, resolve(viewerToken, id, good).status)
	require.Equal(t, http.StatusNotFound, resolve(operatorToken, "00000000-0000-0000-0000-000000000000", good).status)
	require.Equal(t, http.StatusBadRequest, resolve(operatorToken, "po-1", good).status)
	done := b.payout(t, "SUCCEEDED")
	a := resolve(operatorToken, done, good)
	require.Equal(t, http.StatusConflict, a.status, a.raw)
	require.Contains(t, a.errorMessage(), "SUCCEEDED")
	require.Zero(t, b.count(t, `SELECT count(*) FROM payout_resolutions`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM transaction_outbox`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM audit_log`))

	a = resolve(operatorToken, id, good)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	rid := a.body["id"].(string)
	require.Equal(t, "pending", a.body["status"])
	require.Equal(t, "bob", a.body["requested_by"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM transaction_outbox WHERE topic = 'aegis.transactions'
		AND partition_key = 'user-1' AND event_type = 'payout.resolution' AND payload->>'resolution_id' = $1
		AND payload->>'outcome' = 'failed' AND payload->>'psp_object_id' = 'po_1Abc' AND payload->>'operator' = 'bob'
		AND headers->>'message_id' = 'payout-resolution:' || $1`, rid))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE actor = 'bob' AND action = 'payout_resolve'
		AND target_type = 'payout' AND target_id = $1 AND detail->>'resolution_id' = $2`, id, rid))

	a = resolve(operatorToken, id, good)
	require.Equal(t, http.StatusConflict, a.status, "one resolution in flight at a time")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM transaction_outbox`))

	g := get(t, b.url+"/v1/resolutions/"+rid, viewerToken)
	require.Equal(t, http.StatusOK, g.status, g.raw)
	require.Equal(t, "pending", g.body["status"])
	// The worker's verdict, as payout-worker writes it.
	verdict(t, b, rid, "refused", "the PSP says the payout was paid")
	g = get(t, b.url+"/v1/resolutions/"+rid, viewerToken)
	require.Equal(t, "refused", g.body["status"])
	require.Equal(t, "the PSP says the payout was paid", g.body["psp_answer"])
	require.NotNil(t, g.body["decided_at"])
	l := get(t, b.url+"/v1/payouts/"+id+"/resolutions", viewerToken)
	require.Len(t, l.body["items"], 1)
	require.Equal(t, http.StatusNotFound, get(t, b.url+"/v1/resolutions/nope", viewerToken).status)
	p := get(t, b.url+"/v1/payouts?status=NEEDS_REVIEW", viewerToken)
	require.Equal(t, "refused", p.body["items"].([]any)[0].(map[string]any)["resolution_status"])
	// Refused: it may be resolved again; the refused one keeps its verdict.
	again := resolve(operatorToken, id, good)
	require.Equal(t, http.StatusAccepted, again.status, again.raw)
	require.Equal(t, "pending", again.body["status"])
	g = get(t, b.url+"/v1/resolutions/"+rid, viewerToken)
	require.Equal(t, "refused", g.body["status"])
	require.Equal(t, "the PSP says the payout was paid", g.body["psp_answer"])
	require.Equal(t, http.StatusConflict, resolve(operatorToken, id, good).status, "the new one is in flight")
}

// verdict records payout-worker's verdict on resolution rid as it does: a
// resolution_verdicts row; payout_resolutions is left pending.
func verdict(t *testing.T, b bundle, rid, status, answer string) {
	t.Helper()
	fixture.Verdict{ResolutionID: rid, Status: status, PSPAnswer: answer}.Insert(t, b.db.Pool)
}

// During a rollout the previous payout-worker writes its verdict on
// payout_resolutions itself: operators see it as before, and the payout may
// be resolved again.
func TestResolutionShowsTheVerdictOfThePreviousWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.payout(t, "NEEDS_REVIEW")
	good := `{"outcome":"failed","reason":"Stripe dashboard: payout failed, account closed","psp_object_id":"po_1Abc"}`
	a := call(t, http.MethodPost, b.url+"/v1/payouts/"+id+"/resolve", operatorToken, good)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	rid := a.body["id"].(string)

	_, err := b.db.Pool.Exec(context.Background(), `UPDATE payout_resolutions SET status = 'refused',
		psp_answer = 'lookup failed: 503', decided_at = now() WHERE id = $1 AND status = 'pending'`, rid)
	require.NoError(t, err)
	g := get(t, b.url+"/v1/resolutions/"+rid, viewerToken)
	require.Equal(t, "refused", g.body["status"], g.raw)
	require.Equal(t, "lookup failed: 503", g.body["psp_answer"])
	require.NotNil(t, g.body["decided_at"])
	l := get(t, b.url+"/v1/payouts/"+id+"/resolutions", viewerToken)
	require.Equal(t, "refused", l.body["items"].([]any)[0].(map[string]any)["status"], l.raw)
	p := get(t, b.url+"/v1/payouts?status=NEEDS_REVIEW", viewerToken)
	require.Equal(t, "refused", p.body["items"].([]any)[0].(map[string]any)["resolution_status"], p.raw)

	again := call(t, http.MethodPost, b.url+"/v1/payouts/"+id+"/resolve", operatorToken, good)
	require.Equal(t, http.StatusAccepted, again.status, again.raw)
	// The current worker decides the new one.
	verdict(t, b, again.body["id"].(string), "applied", "the PSP has no object for the payout")
	g = get(t, b.url+"/v1/resolutions/"+again.body["id"].(string), viewerToken)
	require.Equal(t, "applied", g.body["status"], g.raw)
	g = get(t, b.url+"/v1/resolutions/"+rid, viewerToken)
	require.Equal(t, "refused", g.body["status"], g.raw)
	require.Equal(t, "lookup failed: 503", g.body["psp_answer"])
}

func fourEyes(t *testing.T) bundle {
	t.Helper()
	db := pgtest.New(t)
	return bundle{db: db, url: newServerWith(t, db, "alice:viewer:"+viewerToken+",bob:operator:"+operatorToken+
		",carol:operator:"+secondOperatorToken, "", fourEyesConfig{RequireSecondApprover: true, Threshold: 1})}
}

// REQUIRE_SECOND_APPROVER: a resolution and a bulk replay above the
// threshold take effect only when a different operator approves.
func TestFourEyes(t *testing.T) {
	t.Parallel()
	b := fourEyes(t)
	id := b.payout(t, "NEEDS_REVIEW")
	a := call(t, http.MethodPost, b.url+"/v1/payouts/"+id+"/resolve", operatorToken,
		`{"outcome":"paid","reason":"bank statement shows it","psp_object_id":"po_9"}`)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, "awaiting_approval", a.body["status"])
	rid := a.body["id"].(string)
	approval := int64(a.body["approval_id"].(float64))
	require.Zero(t, b.count(t, `SELECT count(*) FROM transaction_outbox`), "nothing is sent before approval")

	l := get(t, b.url+"/v1/approvals", viewerToken)
	require.Equal(t, http.StatusOK, l.status, l.raw)
	require.Len(t, l.body["items"], 1)
	require.Equal(t, "payout_resolution", l.body["items"].([]any)[0].(map[string]any)["kind"])

	approve := func(token string, id int64) answer {
		return call(t, http.MethodPost, fmt.Sprintf("%s/v1/approvals/%d/approve", b.url, id), token, "")
	}
	a = approve(operatorToken, approval)
	require.Equal(t, http.StatusForbidden, a.status, "the requester cannot approve their own request")
	require.Equal(t, http.StatusForbidden, approve(viewerToken, approval).status)
	require.Equal(t, http.StatusNotFound, approve(secondOperatorToken, approval+100).status)
	require.Zero(t, b.count(t, `SELECT count(*) FROM transaction_outbox`))

	a = approve(secondOperatorToken, approval)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, "approved", a.body["status"])
	require.Equal(t, "carol", a.body["decided_by"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM transaction_outbox WHERE payload->>'resolution_id' = $1
		AND payload->>'approved_by' = 'carol' AND payload->>'operator' = 'bob'`, rid))
	g := get(t, b.url+"/v1/resolutions/"+rid, viewerToken)
	require.Equal(t, "pending", g.body["status"])
	require.Equal(t, "carol", g.body["approved_by"])
	require.Equal(t, http.StatusConflict, approve(secondOperatorToken, approval).status)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'approve' AND actor = 'carol'`))

	// A rejected resolution sends nothing.
	other := b.payout(t, "NEEDS_REVIEW")
	a = call(t, http.MethodPost, b.url+"/v1/payouts/"+other+"/resolve", operatorToken,
		`{"outcome":"failed","reason":"r","psp_object_id":"po_8"}`)
	rejected := int64(a.body["approval_id"].(float64))
	r := call(t, http.MethodPost, fmt.Sprintf("%s/v1/approvals/%d/reject", b.url, rejected), secondOperatorToken, "")
	require.Equal(t, http.StatusBadRequest, r.status, "a rejection needs a reason")
	r = call(t, http.MethodPost, fmt.Sprintf("%s/v1/approvals/%d/reject", b.url, rejected), secondOperatorToken, `{"reason":"no evidence"}`)
	require.Equal(t, http.StatusOK, r.status, r.raw)
	g = get(t, b.url+"/v1/resolutions/"+a.body["id"].(string), viewerToken)
	require.Equal(t, "rejected", g.body["status"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM transaction_outbox`))

	// A bulk replay above the threshold waits; at or below it runs at once.
	insert(t, b.db, "aegis.transactions", "transient", 1, t0, commandPayload(id), nil)
	a = call(t, http.MethodPost, b.url+"/v1/dead-letters/replay", operatorToken, `{"max":10,"reason":"psp back"}`)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, "queued", a.body["status"], "one letter, not above the threshold: a job at once")
	insert(t, b.db, "aegis.transactions", "transient", 2, t0, commandPayload(other), nil)
	insert(t, b.db, "aegis.transactions", "transient", 3, t0, commandPayload(other), nil)
	jobs := b.count(t, `SELECT count(*) FROM replay_jobs`)
	a = call(t, http.MethodPost, b.url+"/v1/dead-letters/replay", operatorToken, `{"max":10,"reason":"psp back"}`)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	held := a.body["approval"].(map[string]any)
	require.Equal(t, "bulk_replay", held["kind"])
	require.Equal(t, jobs, b.count(t, `SELECT count(*) FROM replay_jobs`), "no job before approval")
	a = approve(secondOperatorToken, int64(held["id"].(float64)))
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, jobs+1, b.count(t, `SELECT count(*) FROM replay_jobs`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM replay_jobs WHERE id = $1::bigint AND actor = 'bob'`, a.body["result_id"]))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'bulk_replay' AND target_id = $1
		AND detail->>'approved_by' = 'carol'`, a.body["result_id"]))
}

// A dead-lettered resolution command replays as a no-op once its
// resolution was decided: the worker applies each resolution once.
func TestReplayOfADecidedResolutionIsANoop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.payout(t, "NEEDS_REVIEW")
	a := call(t, http.MethodPost, b.url+"/v1/payouts/"+id+"/resolve", operatorToken,
		`{"outcome":"failed","reason":"checked","psp_object_id":"po_2"}`)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	rid := a.body["id"].(string)
	payload := []byte(fmt.Sprintf(`{"resolution_id":%q,"payout_id":%q,"user_id":"user-1","outcome":"failed"}`, rid, id))
	pending := insert(t, b.db, "aegis.transactions", "transient", 1, t0, payload, nil)
	r := call(t, http.MethodPost, fmt.Sprintf("%s/v1/dead-letters/%d/replay", b.url, pending), operatorToken, "")
	require.Equal(t, http.StatusAccepted, r.status, r.raw)
	require.Equal(t, "republished", r.body["outcome"], "still pending: the worker decides")

	verdict(t, b, rid, "applied", "the PSP has no object for the payout")
	decided := insert(t, b.db, "aegis.transactions", "transient", 2, t0, payload, nil)
	r = call(t, http.MethodPost, fmt.Sprintf("%s/v1/dead-letters/%d/replay", b.url, decided), operatorToken, "")
	require.Equal(t, http.StatusAccepted, r.status, r.raw)
	require.Equal(t, "noop", r.body["outcome"], r.raw)
	require.Equal(t, "RESOLUTION_APPLIED", r.body["subject_state"], r.raw)
}
