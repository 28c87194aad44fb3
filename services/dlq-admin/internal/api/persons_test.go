package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/pgtest"
)

const (
	anaToken       = "ana-operator-token-0123456789"
	anaSpacedToken = "ana-spaced-token-0123456789"
	anaScriptToken = "ana-script-token-0123456789"
	samToken       = "sam-operator-token-0123456789"
)

// resolveAwaiting asks for a resolution of a new NEEDS_REVIEW payout with
// token and returns its approval.
func (b bundle) resolveAwaiting(t *testing.T, token string) int64 {
	t.Helper()
	id := b.payout(t, "NEEDS_REVIEW")
	a := call(t, http.MethodPost, b.url+"/v1/payouts/"+id+"/resolve", token,
		`{"outcome":"paid","reason":"bank statement shows it","psp_object_id":"po_9"}`)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, "awaiting_approval", a.body["status"])
	return int64(a.body["approval_id"].(float64))
}

func (b bundle) approve(t *testing.T, token string, approval int64) answer {
	t.Helper()
	return call(t, http.MethodPost, fmt.Sprintf("%s/v1/approvals/%d/approve", b.url, approval), token, "")
}

// Four-eyes compares people: "ana" and " Ana " (two spellings of one
// name) cannot approve each other's request, nor can two tokens that
// DLQ_ADMIN_TOKEN_PERSONS gives to one person; another person can.
func TestFourEyesComparesPersonsNotTokens(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	b := bundle{db: db, url: newServerWith(t, db,
		"ana:operator:"+anaToken+", Ana :operator:"+anaSpacedToken+",ana-script:operator:"+anaScriptToken+",sam:operator:"+samToken,
		"ana-script=ＡＮＡ", fourEyesConfig{RequireSecondApprover: true})}

	approval := b.resolveAwaiting(t, anaToken)
	for _, token := range []string{anaSpacedToken, anaScriptToken, anaToken} {
		a := b.approve(t, token, approval)
		require.Equal(t, http.StatusForbidden, a.status, a.raw)
	}
	other := b.resolveAwaiting(t, anaSpacedToken)
	require.Equal(t, http.StatusForbidden, b.approve(t, anaToken, other).status, "' Ana ' is ana")
	require.Zero(t, b.count(t, `SELECT count(*) FROM transaction_outbox`), "nothing is sent")
	require.Zero(t, b.count(t, `SELECT count(*) FROM approvals WHERE status <> 'pending'`))

	a := b.approve(t, samToken, approval)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM approvals WHERE id = $1 AND requested_person = 'ana' AND decided_person = 'sam'`, approval))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM transaction_outbox`))

	// The table refuses an approval by the requester's person too.
	_, err := db.Pool.Exec(t.Context(), `UPDATE approvals SET status = 'approved', decided_by = 'ana-script', decided_person = 'ana'
		WHERE id = $1`, other)
	require.ErrorContains(t, err, "approvals_second_person_by_person")
}

// With SECOND_APPROVER_RESOLUTION_AMOUNT a resolution of a payout of more
// than the amount waits for a second person; one of at most it is sent at
// once.
func TestFourEyesAboveAnAmount(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	b := bundle{db: db, url: newServerWith(t, db, "ana:operator:"+anaToken, "",
		fourEyesConfig{RequireSecondApprover: true, ResolutionAmount: 1500})}
	small := b.payout(t, "NEEDS_REVIEW") // 1500: not above
	a := call(t, http.MethodPost, b.url+"/v1/payouts/"+small+"/resolve", anaToken,
		`{"outcome":"paid","reason":"bank statement shows it","psp_object_id":"po_9"}`)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, "pending", a.body["status"])

	large := b.payout(t, "NEEDS_REVIEW")
	_, err := db.Pool.Exec(t.Context(), `UPDATE payouts SET amount = 1501 WHERE id = $1`, large)
	require.NoError(t, err)
	a = call(t, http.MethodPost, b.url+"/v1/payouts/"+large+"/resolve", anaToken,
		`{"outcome":"paid","reason":"bank statement shows it","psp_object_id":"po_9"}`)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, "awaiting_approval", a.body["status"])
}
