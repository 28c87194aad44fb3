package api_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/payouts"
)

// A token that registers a destination cannot pay every wallet in its scope
// to it at once: while the destination is younger than the cooling-off, its
// payouts add up to at most the cap (422 destination_cooling_off, in the
// error shape of every refusal, nothing written); after it, it is paid as
// any other. A destination registered before is not held back, nor is a
// currency without a cap.
func TestANewDestinationIsPaidOnlyUpToItsCapUntilItsCoolingOffEnds(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	var ahead atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	url := newServerWith(t, db.Pool, []string{stripeSecret}, options{now: now, limits: payouts.Limits{
		NewDestination: map[string]int64{"usd": 1000}, CoolingOff: 24 * time.Hour,
	}})
	body := func(user string, amount int, currency, dest string) string {
		return fmt.Sprintf(`{"user_id":%q,"amount":%d,"currency":%q,"destination":%q,"provider":"stripe"}`, user, amount, currency, dest)
	}
	for _, u := range []string{"user-1", "user-2", "user-3"} {
		register(t, url, clientToken, u, "stripe", "acct_attacker")
	}
	require.Equal(t, 202, payoutRequest(t, url, clientToken, "c-1", body("user-1", 600, "usd", "acct_attacker")).status)
	over := payoutRequest(t, url, clientToken, "c-2", body("user-1", 401, "usd", "acct_attacker"))
	require.Equal(t, 422, over.status, over.body)
	require.Equal(t, "destination_cooling_off", over.errorCode())
	msg := over.body["error"].(map[string]any)["message"].(string)
	require.Contains(t, msg, "at most 1000 usd in all (already 600)")
	require.Contains(t, msg, "until ")
	require.Equal(t, 202, payoutRequest(t, url, clientToken, "c-3", body("user-1", 400, "usd", "acct_attacker")).status, "up to the cap")
	// Every wallet in scope, one new destination each: each up to its cap.
	for i, u := range []string{"user-2", "user-3"} {
		a := payoutRequest(t, url, clientToken, fmt.Sprintf("c-all-%d", i), body(u, 5000, "usd", "acct_attacker"))
		require.Equal(t, 422, a.status, a.body)
	}
	require.Equal(t, 202, payoutRequest(t, url, clientToken, "c-4", body("user-2", 5000, "eur", "acct_attacker")).status,
		"a currency without a cap is not held back")
	require.Equal(t, 3, count(t, db, "SELECT count(*) FROM payouts"))

	// A failed payout gives its room back.
	require.Equal(t, 1, count(t, db, `WITH f AS (UPDATE payouts SET status = 'FINALIZED' WHERE idempotency_key = 'c-3' RETURNING 1) SELECT count(*) FROM f`))
	require.Equal(t, 202, payoutRequest(t, url, clientToken, "c-5", body("user-1", 400, "usd", "acct_attacker")).status)

	// After the cooling-off the destination is paid as any other.
	ahead.Store(int64(24*time.Hour + time.Second))
	require.Equal(t, 202, payoutRequest(t, url, clientToken, "c-6", body("user-3", 5000, "usd", "acct_attacker")).status)
	require.Equal(t, 202, payoutRequest(t, url, clientToken, "c-7", body("user-1", 5000, "usd", "acct_attacker")).status)
}

// DESTINATION_COOLING_OFF=0 is the off-switch.
func TestNoCoolingOffWhenItIsOff(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	url := newServerWith(t, db.Pool, []string{stripeSecret}, options{limits: payouts.Limits{NewDestination: map[string]int64{"usd": 1000}}})
	register(t, url, clientToken, "user-1", "stripe", "acct_123")
	require.Equal(t, 202, payoutRequest(t, url, clientToken, "o-1", payoutBody).status)
}
