package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A 503 says which part of dlq-admin failed: an area other than the
// dead-letter store no longer answers that the dead-letter store is
// unavailable. Each case takes one table away, the way a failed
// Postgres would, and asks for something that needs it (a view, for a
// table dlq-admin reads through one).
func TestUnavailableSaysWhatFailed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, table string
		ask         func(b bundle) answer
		want        string
	}{
		{"approvals", "approvals", func(b bundle) answer { return get(t, b.url+"/v1/approvals", viewerToken) },
			"the approval gate is unavailable"},
		{"audit log", "audit_log", func(b bundle) answer {
			id := b.payout(t, "NEEDS_REVIEW")
			return call(t, http.MethodPost, b.url+"/v1/payouts/"+id+"/resolve", operatorToken,
				`{"outcome":"paid","reason":"bank statement shows it","psp_object_id":"po_9"}`)
		}, "the audit log is unavailable"},
		{"payouts", "payout_attempts_for_ops", func(b bundle) answer {
			return get(t, b.url+"/v1/payouts/"+b.payout(t, "NEEDS_REVIEW"), viewerToken)
		}, "the payouts read model is unavailable"},
		{"reconciliation", "reconciliation_runs", func(b bundle) answer {
			return get(t, b.url+"/v1/reconciliation", viewerToken)
		}, "the ledger integrity check is unavailable"},
		{"dead letters", "dead_letters", func(b bundle) answer { return get(t, b.url+"/v1/dead-letters", viewerToken) },
			"the dead-letter store is unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			_, err := b.db.Pool.Exec(context.Background(), `ALTER TABLE `+tc.table+` RENAME TO `+tc.table+`_gone`)
			require.NoError(t, err)
			a := tc.ask(b)
			require.Equal(t, http.StatusServiceUnavailable, a.status, a.raw)
			require.Equal(t, "unavailable", a.errorCode())
			require.Equal(t, tc.want+"; retry later", a.errorMessage())
			if tc.table != "dead_letters" {
				require.NotContains(t, a.errorMessage(), "dead-letter store")
			}
		})
	}
}
