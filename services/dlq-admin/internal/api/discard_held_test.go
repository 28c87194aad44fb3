package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// A letter whose payout still holds money (in review, its hold neither
// settled nor released) is not discarded: 409 in the contract's error
// shape with code holds_money, naming the letter and the payout, alone or
// in bulk; the letter stays open.
func TestDiscardOfALetterWhosePayoutHoldsMoneyIs409(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const pid = "0193a9c8-0000-7000-8000-0000000000c1"
	_, err := b.db.Pool.Exec(ctx, `INSERT INTO payouts (id, client_id, idempotency_key, request_hash, user_id, amount, currency, destination, provider, status)
		VALUES ($1::uuid, 'shop', $1::text, 'h', 'user-1', 700, 'usd', 'ba_1', 'stripe', 'NEEDS_REVIEW')`, pid)
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, `
		WITH u AS (INSERT INTO wallets (kind, owner, currency) VALUES ('user', 'user-1', 'usd') RETURNING id),
		     h AS (INSERT INTO wallets (kind, owner, currency) VALUES ('system', 'payout_holds', 'usd') RETURNING id),
		     t AS (INSERT INTO ledger_transactions (kind, reference) VALUES ('payout_hold', $1) RETURNING id)
		INSERT INTO ledger_entries (transaction_id, wallet_id, amount, currency)
		SELECT t.id, u.id, -700, 'usd' FROM t, u UNION ALL SELECT t.id, h.id, 700, 'usd' FROM t, h`, pid)
	require.NoError(t, err)
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
