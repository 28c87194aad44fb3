package store_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
)

// A filter's value is a bound parameter, never SQL text: values that would
// widen the match, end the statement or name another filter's parameter
// match only a letter holding exactly that value, through every filtered
// statement, and the table is still there afterwards.
func TestFilterValuesAreParametersNotSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	hostile := []string{
		"x' OR '1'='1",
		"x'; DROP TABLE dead_letters; --",
		"@error_class",
		"*/ true OR /*",
	}
	id := b.seed(t, fixture())
	topical := make(map[string]int64, len(hostile))
	for _, h := range hostile {
		topical[h] = b.insert(t, seedRow{topic: h, class: "permanent", status: store.StatusOpen, failedAt: t0})
	}

	for _, h := range hostile {
		every := store.Match{Topic: h, Status: store.StatusOpen, ErrorClass: "permanent", Since: t0,
			Until: t0.Add(time.Hour), PayoutID: "p1", User: "user-1", CorrelationID: "c", EventType: "payout.requested"}
		for _, m := range []store.Match{{Topic: h}, every} {
			items, _, err := b.store.List(ctx, store.Filter{Match: m})
			require.NoError(t, err)
			require.Equal(t, []int64{topical[h]}, ids(items), "topic %q", h)

			groups, err := b.store.Groups(ctx, m)
			require.NoError(t, err)
			require.Len(t, groups, 1, "topic %q", h)
			require.EqualValues(t, 1, groups[0].Count)

			sel := store.Selection{Match: m, Upto: math.MaxInt64}
			n, err := b.store.CountOpen(ctx, sel)
			require.NoError(t, err)
			require.EqualValues(t, 1, n, "topic %q", h)
			open, err := b.store.OpenIDs(ctx, sel, 10)
			require.NoError(t, err)
			require.Equal(t, []int64{topical[h]}, open)
		}
		for _, m := range []store.Match{{ErrorClass: h}, {PayoutID: h}, {User: h}, {CorrelationID: h}, {EventType: h},
			{Topic: kafkax.TopicTransactions, EventType: h}} {
			items, _, err := b.store.List(ctx, store.Filter{Match: m})
			require.NoError(t, err)
			require.Empty(t, items, "filter %+v", m)
			groups, err := b.store.Groups(ctx, m)
			require.NoError(t, err)
			require.Empty(t, groups, "filter %+v", m)
			n, err := b.store.CountOpen(ctx, store.Selection{Match: m, Upto: math.MaxInt64})
			require.NoError(t, err)
			require.Zero(t, n, "filter %+v", m)
		}
	}

	items, _, err := b.store.List(ctx, store.Filter{})
	require.NoError(t, err)
	require.Len(t, items, len(id)+len(hostile), "every letter is still there")
}

// A selection's ids narrow it; its own status filter does not (only open
// letters are selected).
func TestSelectionTakesOpenLettersAmongItsIDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.seed(t, fixture())
	sel := store.Selection{Match: store.Match{Status: store.StatusDiscarded}, Upto: math.MaxInt64,
		IDs: []int64{id[0], id[2], id[4]}}
	open, err := b.store.OpenIDs(ctx, sel, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{id[0], id[4]}, open, "id[2] is discarded")
	sel.After = id[0]
	n, err := b.store.CountOpen(ctx, sel)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}
