package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/tools/devstack/internal/published"
)

// TestOperatorResolvesANeedsReviewPayout: a payout whose last attempt's
// answer was lost waits in NEEDS_REVIEW with its hold; the PSP then pays it
// and its webhook is lost. Through dlq-admin an operator first says it
// failed: the worker checks the PSP's record, which says paid, and refuses
// (the hold is not given back). The operator then says paid with the PSP's
// object: the hold is settled once, through the outbox, the relay and the
// worker. A redelivered command changes nothing.
func TestOperatorResolvesANeedsReviewPayout(t *testing.T) {
	t.Parallel()
	s := startWith(t, "0", map[string]string{"PSP_MAX_ATTEMPTS": "2", "PSP_CALL_TIMEOUT": "1s", "PSP_SETTLE_WINDOW": "2s"})
	user := "rosa"
	wallet := func() float64 {
		w := s.do(http.MethodGet, s.api+"/v1/wallets/"+user, nil, s.bearer(s.token))
		if w.status != 200 {
			return -1
		}
		return w.body["balance"].(float64)
	}
	require.Equal(t, 200, s.signedStripe(payment("evt_resolve_credit", user, 5000)).status)
	s.registerDestination(user, "stripe", "acct_rosa", "") // paid by a transfer alone
	s.eventually("wallet credited", func() bool { return wallet() == 5000 })

	f := s.do(http.MethodPut, s.psp+"/_psp/faults", []byte(`{"provider":"stripe","timeout":"3s","next":[`+
		`{"kind":"timeout","count":1},{"kind":"timeout_after_create","count":1}]}`), nil)
	require.Equal(t, 200, f.status, f.raw)
	p := s.do(http.MethodPost, s.api+"/v1/payouts", []byte(`{"user_id":"rosa","amount":1500,"currency":"usd","destination":"acct_rosa","provider":"stripe"}`),
		map[string]string{"Authorization": "Bearer " + s.token, "Idempotency-Key": "e2e-resolve-payout"})
	require.Equal(t, 202, p.status, p.raw)
	pid := p.body["payout_id"].(string)
	status := func() string {
		g := s.do(http.MethodGet, s.api+"/v1/payouts/"+pid, nil, s.bearer(s.token))
		st, _ := g.body["status"].(string)
		return st
	}
	s.eventually("payout needs review", func() bool { return status() == "NEEDS_REVIEW" })
	require.EqualValues(t, 3500, wallet())

	// The console's list shows it first.
	l := s.do(http.MethodGet, s.dlq+"/v1/payouts?status=NEEDS_REVIEW", nil, s.bearer(s.opToken))
	require.Equal(t, 200, l.status, l.raw)
	require.Equal(t, pid, l.body["items"].([]any)[0].(map[string]any)["id"])

	// The PSP pays the object the lost attempt made; its webhook is lost.
	require.Equal(t, 200, s.do(http.MethodPut, s.psp+"/_psp/faults", []byte(`{"drop_webhook_rate":1}`), nil).status)
	o := s.do(http.MethodGet, s.psp+"/_psp/objects?payout_id="+pid, nil, nil)
	objs, _ := o.body["items"].([]any)
	require.Len(t, objs, 1)
	obj := objs[0].(map[string]any)["id"].(string)
	settle := s.do(http.MethodPost, fmt.Sprintf("%s/_psp/objects/%s/settle", s.psp, obj), []byte(`{"outcome":"paid"}`), nil)
	require.Equal(t, 200, settle.status, settle.raw)

	resolve := func(outcome string) string {
		r := s.do(http.MethodPost, s.dlq+"/v1/payouts/"+pid+"/resolve",
			fmt.Appendf(nil, `{"outcome":%q,"reason":"e2e: checked the PSP dashboard","psp_object_id":%q}`, outcome, obj), s.bearer(s.opToken))
		require.Equal(t, 202, r.status, r.raw)
		return r.body["id"].(string)
	}
	verdict := func(rid string) map[string]any {
		var body map[string]any
		s.eventually("resolution decided", func() bool {
			g := s.do(http.MethodGet, s.dlq+"/v1/resolutions/"+rid, nil, s.bearer(s.opToken))
			body = g.body
			st, _ := g.body["status"].(string)
			return st == "applied" || st == "refused"
		})
		return body
	}

	refused := verdict(resolve("failed"))
	require.Equal(t, "refused", refused["status"])
	require.Contains(t, refused["psp_answer"], "paid")
	require.Equal(t, "NEEDS_REVIEW", status())
	require.EqualValues(t, 3500, wallet(), "never given back while the PSP paid")
	require.Zero(t, s.count(`SELECT count(*) FROM ledger_transactions WHERE reference = $1 AND kind = 'payout_release'`, pid))

	rid := resolve("paid")
	applied := verdict(rid)
	require.Equal(t, "applied", applied["status"], applied)
	require.Equal(t, "SUCCEEDED", status())
	require.EqualValues(t, 3500, wallet())
	require.Equal(t, 1, s.count(`SELECT count(*) FROM ledger_transactions WHERE reference = $1 AND kind = 'payout_settle'`, pid))
	require.Equal(t, 2, s.count(`SELECT count(*) FROM audit_log WHERE action = 'payout_resolve' AND target_id = $1 AND actor = 'ops'`, pid))

	// The command delivered again under another message id: decided once.
	var headers map[string]string
	row := s.db.Pool.QueryRow(t.Context(), `SELECT headers FROM `+published.All+` o WHERE payload->>'resolution_id' = $1`, rid)
	require.NoError(t, row.Scan(&headers))
	headers["message_id"] += ":again"
	hb, _ := json.Marshal(headers)
	_, err := s.db.Pool.Exec(t.Context(), `
		INSERT INTO transaction_outbox (topic, event_type, partition_key, payload, headers, correlation_id)
		SELECT topic, event_type, partition_key, payload, $2, correlation_id FROM `+published.All+` o WHERE payload->>'resolution_id' = $1`, rid, hb)
	require.NoError(t, err)
	s.eventually("redelivery processed", func() bool {
		return s.count(`SELECT count(*) FROM processed_events WHERE consumer_group = 'payout-worker' AND event_id = $1`, headers["message_id"]) == 1
	})
	require.Equal(t, 1, s.count(`SELECT count(*) FROM ledger_transactions WHERE reference = $1 AND kind = 'payout_settle'`, pid))
	require.Equal(t, 1, s.count(`SELECT count(*) FROM payout_transitions WHERE payout_id = $1 AND to_status = 'SUCCEEDED'`, pid))
	require.Zero(t, s.count(`SELECT count(*) FROM (SELECT 1 FROM ledger_entries GROUP BY transaction_id, currency HAVING sum(amount) <> 0) x`))
}
