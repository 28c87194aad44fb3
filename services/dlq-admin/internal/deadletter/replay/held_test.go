package replay_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
)

// post plants one of the worker's payout postings (kind, reference the
// payout id): wallet → holds for a hold, holds → clearing for a settlement.
func (b *bundle) post(t *testing.T, kind, payoutID string) {
	t.Helper()
	from, to := fixture.System(fixture.PSPClearing), fixture.System(fixture.PayoutHolds)
	if kind == fixture.LedgerSettle {
		from, to = to, from
	}
	fixture.Posting{Kind: kind, Reference: payoutID, From: from, To: to, Amount: 700}.Insert(t, b.db.Pool)
}

// A dead letter whose payout still holds money (unfinished, its hold
// neither settled nor released) is not discarded, alone or in bulk: the
// hold would be left with nobody asked. Once the payout is resolved, or
// when it never held anything, the letter is discarded as before.
func TestDiscardOfALetterWhosePayoutHoldsMoneyIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	held := b.payout(t, "NEEDS_REVIEW")
	b.post(t, "payout_hold", held)
	letter := b.commandLetter(t, held)

	_, err := b.svc.Discard(ctx, letter, "ops", "looks stuck")
	require.ErrorIs(t, err, replay.ErrHoldsMoney)
	var refusal *replay.HoldsMoneyError
	require.ErrorAs(t, err, &refusal)
	require.Equal(t, []replay.HeldLetter{{LetterID: letter, PayoutID: held, Status: "NEEDS_REVIEW"}}, refusal.Letters)
	require.Contains(t, err.Error(), "payout "+held+" is NEEDS_REVIEW")
	require.Contains(t, err.Error(), "resolve the payout")

	other := b.letter(t, nil) // a letter about no payout of ours
	for _, req := range []replay.BulkDiscardRequest{
		{Max: 10, Reason: "cleanup"},
		{Max: 10, DryRun: true},
		{IDs: []int64{letter}, Reason: "cleanup"},
	} {
		_, err = b.svc.BulkDiscard(ctx, "ops", req)
		require.ErrorIs(t, err, replay.ErrHoldsMoney, "%+v", req)
	}
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'open'`), "nothing discarded")
	require.Zero(t, b.count(t, `SELECT count(*) FROM audit_log`))

	// Never held anything (INITIALIZED): discarded.
	fresh := b.commandLetter(t, b.payout(t, "INITIALIZED"))
	_, err = b.svc.Discard(ctx, fresh, "ops", "client cancelled")
	require.NoError(t, err)

	// Resolved: the hold is settled and the payout SUCCEEDED.
	b.post(t, "payout_settle", held)
	_, err = b.db.Pool.Exec(ctx, `UPDATE payouts SET status = 'SUCCEEDED' WHERE id = $1`, held)
	require.NoError(t, err)
	res, err := b.svc.BulkDiscard(ctx, "ops", replay.BulkDiscardRequest{Max: 10, Reason: "resolved"})
	require.NoError(t, err)
	require.ElementsMatch(t, []int64{letter, other}, res.IDs)
	require.Zero(t, b.count(t, `SELECT count(*) FROM dead_letters WHERE status = $1`, store.StatusOpen))
}
