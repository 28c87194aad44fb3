package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestForgedOutcomeDatedAheadDoesNotStrandThePayout: a signed payout.paid
// with the wrong amount, dated a minute ahead, reaches webhook-api before
// the PSP's own event. The worker refuses it (outcome_mismatch); the PSP's
// genuine payout.paid, dated earlier, must still finish the payout: the
// forged event must not make it look stale.
func TestForgedOutcomeDatedAheadDoesNotStrandThePayout(t *testing.T) {
	t.Parallel()
	s := startWith(t, "0", nil) // the PSP settles only when the test says
	user := "fiona"
	require.Equal(t, 200, s.signedStripe(payment("evt_forge_credit", user, 5000)).status)
	// The credit and the payout travel on different topics, in no order
	// between them (services/payout-worker/internal/payout/order.go): a
	// payout requested before the credit lands ends FINALIZED for
	// insufficient funds, so wait.
	s.eventually("wallet credited", func() bool { return s.balance(user) == 5000 })
	s.registerDestination(user, "stripe", "acct_fiona", "ba_fiona_checking")
	p := s.do(http.MethodPost, s.api+"/v1/payouts",
		[]byte(`{"user_id":"fiona","amount":1500,"currency":"usd","destination":"acct_fiona","provider":"stripe"}`),
		map[string]string{"Authorization": "Bearer " + s.token, "Idempotency-Key": "e2e-forged-ahead"})
	require.Equal(t, 202, p.status, p.raw)
	pid := p.body["payout_id"].(string)
	get := func() answer { return s.do(http.MethodGet, s.api+"/v1/payouts/"+pid, nil, s.bearer(s.token)) }
	s.eventually("payout sent", func() bool { return get().body["status"] == "AWAITING_RESPONSE" })
	ref := get().body["psp_reference"].(string)

	// From the connected account, as the genuine one comes: only the
	// amount is wrong.
	forged := []byte(fmt.Sprintf(`{"id":"evt_forged_ahead","object":"event","created":%d,"livemode":false,"account":"acct_fiona","type":"payout.paid",`+
		`"data":{"object":{"id":%q,"object":"payout","amount":150000,"currency":"usd","status":"paid","metadata":{"payout_id":%q}}}}`,
		time.Now().Add(time.Minute).Unix(), ref, pid))
	a := s.signedStripe(forged)
	require.Equal(t, 200, a.status, a.raw)
	s.eventually("forged event refused by the worker", func() bool {
		return s.count(`SELECT count(*) FROM payout_evidence WHERE payout_id = $1 AND verdict = 'outcome_mismatch'`, pid) == 1
	})
	require.Equal(t, "AWAITING_RESPONSE", get().body["status"])

	// The PSP pays and sends its own event, dated now.
	settle := s.do(http.MethodPost, fmt.Sprintf("%s/_psp/objects/%s/settle", s.psp, ref), []byte(`{"outcome":"paid"}`), nil)
	require.Equal(t, 200, settle.status, settle.raw)
	s.eventually("payout paid by the genuine event", func() bool { return get().body["status"] == "SUCCEEDED" })
	w := s.do(http.MethodGet, s.api+"/v1/wallets/"+user, nil, s.bearer(s.token))
	require.EqualValues(t, 3500, w.body["balance"])
	require.Equal(t, 1, s.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_settle' AND reference = $1`, pid))
	require.Zero(t, s.count(`SELECT count(*) FROM ledger_transactions WHERE kind = 'payout_release' AND reference = $1`, pid))
}
