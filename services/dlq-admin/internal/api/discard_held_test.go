package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
)

// A letter whose payout still holds money (in review, its hold neither
// settled nor released) is not discarded: 409 in the contract's error
// shape with code holds_money, naming the letter and the payout, alone or
// in bulk; the letter stays open.
func TestDiscardOfALetterWhosePayoutHoldsMoneyIs409(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const pid = "0193a9c8-0000-7000-8000-0000000000c1"
	fixture.Payout{ID: pid, ClientID: "shop", UserID: "user-1", Amount: 700, Status: payoutstate.NeedsReview}.Insert(t, b.db.Pool)
	fixture.Credit("user-1", 700, "stripe:pi_1").Insert(t, b.db.Pool)
	fixture.Hold(pid, "user-1", 700).Insert(t, b.db.Pool)
	id := insert(t, b.db, kafkax.TopicTransactions, "transient", 1, t0, fmt.Appendf(nil, `{"payout_id":%q,"user_id":"user-1","amount":700}`, pid), nil)

	a := call(t, http.MethodPost, fmt.Sprintf("%s/v1/dead-letters/%d/discard", b.url, id), operatorToken, `{"reason":"stuck"}`)
	require.Equal(t, http.StatusConflict, a.status, a.raw)
	require.Equal(t, "holds_money", a.errorCode())
	require.Contains(t, a.errorMessage(), fmt.Sprintf("letter %d: payout %s is NEEDS_REVIEW", id, pid))

	a = call(t, http.MethodPost, b.url+"/v1/dead-letters/discard", operatorToken, fmt.Sprintf(`{"ids":[%d],"reason":"stuck"}`, id))
	require.Equal(t, http.StatusConflict, a.status, a.raw)
	require.Equal(t, "holds_money", a.errorCode())
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'open'`, id))
	require.Zero(t, b.count(t, `SELECT count(*) FROM audit_log`))
}
