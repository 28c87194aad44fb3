package replay_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
)

// TestBulkDiscardRacingReplaysResolvesEachLetterOnce: a bulk discard and
// single replays of the same letters at once; every letter ends either
// discarded or replayed, never both, with exactly one audit row for it.
func TestBulkDiscardRacingReplaysResolvesEachLetterOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var ids []int64
	for range 30 {
		ids = append(ids, b.letter(t, nil))
	}

	var wg sync.WaitGroup
	var discarded []int64
	replayed := make(chan int64, len(ids))
	wg.Go(func() {
		res, err := b.svc.BulkDiscard(ctx, "ops", replay.BulkDiscardRequest{
			Match: store.Match{ErrorClass: "transient"}, Max: 100, Reason: "incident 42"})
		require.NoError(t, err)
		discarded = res.IDs
	})
	for _, id := range ids {
		wg.Go(func() {
			_, err := b.svc.Replay(ctx, id, "bob", "")
			if err == nil {
				replayed <- id
				return
			}
			require.True(t, errors.Is(err, replay.ErrNotOpen), "%v", err)
		})
	}
	wg.Wait()
	close(replayed)
	n := len(discarded)
	for range replayed {
		n++
	}
	require.Equal(t, len(ids), n, "every letter resolved exactly once")
	require.Zero(t, b.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'open'`))
	require.Equal(t, len(discarded), b.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'discarded'`))
	require.Equal(t, len(ids), b.count(t, `SELECT count(*) FROM audit_log WHERE target_type = 'dead_letter'`))
	require.Equal(t, len(ids)-len(discarded), len(b.outbox(t)))
}

func TestBulkDiscardDryRunAndLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var ids []int64
	for range 5 {
		ids = append(ids, b.letter(t, nil))
	}
	res, err := b.svc.BulkDiscard(ctx, "ops", replay.BulkDiscardRequest{Max: 3, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, replay.BulkDiscarded{DryRun: true, Matched: 5, Discarded: 3, IDs: ids[:3]}, res)
	require.Equal(t, 5, b.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'open'`))

	for _, req := range []replay.BulkDiscardRequest{
		{Max: 3},              // no reason
		{Max: 0, Reason: "x"}, // no max, no ids
		{Max: replay.MaxBulk + 1, Reason: "x"},
		{IDs: []int64{-1}, Reason: "x"},
	} {
		_, err := b.svc.BulkDiscard(ctx, "ops", req)
		var invalid *input.Invalid
		require.ErrorAs(t, err, &invalid, "%+v", req)
	}
	require.Zero(t, b.count(t, `SELECT count(*) FROM audit_log`))
}
