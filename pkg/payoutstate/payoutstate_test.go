package payoutstate_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// The states are the ones the payouts.status CHECK constraint allows: a
// state added to one and not the other fails here.
func TestStatesAreTheCheckConstraint(t *testing.T) {
	db := pgtest.New(t)
	want := payoutstate.Names(payoutstate.Status.Valid)
	slices.Sort(want)
	require.Equal(t, want, db.CheckValues(t, "payouts", "status"))
	require.Len(t, payoutstate.All(), len(want), "All lists each state once")
	require.False(t, payoutstate.Status("PAID").Valid())
}

func TestMeanings(t *testing.T) {
	names := func(has func(payoutstate.Status) bool) []string { return payoutstate.Names(has) }
	require.Equal(t, []string{"SUCCEEDED", "FAILED", "FINALIZED"}, names(payoutstate.Status.Final))
	require.Equal(t, []string{"SENT_TO_GATEWAY", "AWAITING_RESPONSE"}, names(payoutstate.Status.AtPSP))
	require.Equal(t, []string{"SENT_TO_GATEWAY", "AWAITING_RESPONSE", "SUCCEEDED", "FAILED", "FINALIZED"},
		names(payoutstate.Status.IgnoresCommands))
	require.Equal(t, []string{"SENDING_TO_GATEWAY", "SENT_TO_GATEWAY", "AWAITING_RESPONSE", "RETRYING", "NEEDS_REVIEW"},
		names(payoutstate.Status.InFlight))
	require.Equal(t, []string{"INITIALIZED"}, names(payoutstate.Status.Cancelable))
	require.Equal(t, []string{"NEEDS_REVIEW"}, names(payoutstate.Status.Reviewable))
	require.Equal(t, []string{"FAILED", "FINALIZED"}, names(payoutstate.Status.Unpaid))
	require.Equal(t, []string{"SUCCEEDED", "FINALIZED"}, names(payoutstate.Status.Closed))
}

// payout-worker's cancel_payout (migrations 000034) cancels exactly the
// states Cancelable names: a payout in each state is canceled or left as it
// is, inside a transaction rolled back when the test ends.
func TestCancelPayoutCancelsWhatIsCancelable(t *testing.T) {
	t.Parallel()
	tx := pgtest.Tx(t)
	ctx := context.Background()
	for i, s := range payoutstate.All() {
		var id string
		require.NoError(t, tx.QueryRow(ctx, `SELECT id::text FROM create_payout(gen_random_uuid(), 'acme', $1, 'hash', 'alice',
			100, 'usd', 'ba_123', 'stripe', 'corr', NULL)`, fmt.Sprintf("%s-%d", t.Name(), i)).Scan(&id))
		var first string
		require.NoError(t, tx.QueryRow(ctx, `SELECT status FROM payouts WHERE id = $1::uuid`, id).Scan(&first))
		require.Equal(t, payoutstate.Initialized, payoutstate.Status(first), "create_payout makes an INITIALIZED payout")
		_, err := tx.Exec(ctx, `UPDATE payouts SET status = $2 WHERE id = $1::uuid`, id, string(s))
		require.NoError(t, err)

		var (
			canceled bool
			status   string
		)
		require.NoError(t, tx.QueryRow(ctx, `SELECT canceled, status FROM cancel_payout($1::uuid, 'acme')`, id).Scan(&canceled, &status))
		require.Equal(t, s.Cancelable(), canceled, "cancel_payout on a %s payout", s)
		want := s
		if s.Cancelable() {
			want = payoutstate.Finalized
		}
		require.Equal(t, want, payoutstate.Status(status), "a %s payout after cancel_payout", s)
		var stored string
		require.NoError(t, tx.QueryRow(ctx, `SELECT status FROM payouts WHERE id = $1::uuid`, id).Scan(&stored))
		require.Equal(t, want, payoutstate.Status(stored))
	}
}
