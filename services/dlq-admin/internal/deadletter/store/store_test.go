package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

type bundle struct {
	db    *pgtest.DB
	store *store.Store
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := pgtest.New(t)
	return bundle{db: db, store: store.New(db.Pool)}
}

// seedRow is one dead letter of the standard fixture.
type seedRow struct {
	topic, class, status string
	failedAt             time.Time
}

// fixture: ids 1..5 in this order.
func fixture() []seedRow {
	return []seedRow{
		{kafkax.TopicTransactions, "permanent", store.StatusOpen, t0},
		{kafkax.TopicWebhookPending, "transient", store.StatusOpen, t0.Add(1 * time.Hour)},
		{kafkax.TopicTransactions, "transient", store.StatusDiscarded, t0.Add(2 * time.Hour)},
		{kafkax.TopicSettlements, "permanent", store.StatusReplayed, t0.Add(3 * time.Hour)},
		{kafkax.TopicTransactions, "permanent", store.StatusOpen, t0.Add(4 * time.Hour)},
	}
}

func (b bundle) seed(t *testing.T, rows []seedRow) []int64 {
	t.Helper()
	var ids []int64
	for _, r := range rows {
		ids = append(ids, b.insert(t, r))
	}
	return ids
}

// insert stores a consumer letter with a fresh origin and sets its status.
func (b bundle) insert(t *testing.T, r seedRow) int64 {
	t.Helper()
	ctx := context.Background()
	var n int64
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM dead_letters").Scan(&n))
	p, off := int32(0), 1000+n
	id, inserted, err := dlq.Insert(ctx, b.db.Pool, dlq.Letter{
		Source: dlq.SourceConsumer, OriginalTopic: r.topic, OriginalPartition: &p, OriginalOffset: &off,
		ConsumerGroup: "payout-worker", PartitionKey: "user-1", EventType: "payout.requested",
		Payload: []byte(`{"payout_id":"p1"}`), Headers: map[string]string{"correlation_id": "c"},
		Error: "boom", ErrorClass: r.class, RetryCount: 2,
		RetryHistory:   []dlq.Attempt{{At: r.failedAt, Error: "boom", Class: r.class}},
		FirstFailureAt: r.failedAt.Add(-time.Minute), FailedAt: r.failedAt, CorrelationID: "c",
	})
	require.NoError(t, err)
	require.True(t, inserted)
	if r.status != store.StatusOpen {
		_, err := b.db.Pool.Exec(ctx, `UPDATE dead_letters SET status = $2, resolved_at = now(),
			resolved_by = 'ops', resolution_reason = 'test' WHERE id = $1`, id, r.status)
		require.NoError(t, err)
	}
	return id
}

func ids(items []store.Summary) []int64 {
	out := []int64{}
	for _, it := range items {
		out = append(out, it.ID)
	}
	return out
}

func TestListFiltersNewestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.seed(t, fixture())

	cases := []struct {
		name   string
		filter store.Match
		want   []int64
	}{
		{"no filter", store.Match{}, []int64{id[4], id[3], id[2], id[1], id[0]}},
		{"topic", store.Match{Topic: kafkax.TopicTransactions}, []int64{id[4], id[2], id[0]}},
		{"status", store.Match{Status: store.StatusOpen}, []int64{id[4], id[1], id[0]}},
		{"error class", store.Match{ErrorClass: "transient"}, []int64{id[2], id[1]}},
		{"since is inclusive", store.Match{Since: t0.Add(1 * time.Hour)}, []int64{id[4], id[3], id[2], id[1]}},
		{"until is exclusive", store.Match{Until: t0.Add(2 * time.Hour)}, []int64{id[1], id[0]}},
		{"since and until", store.Match{Since: t0.Add(30 * time.Minute), Until: t0.Add(3 * time.Hour)}, []int64{id[2], id[1]}},
		{"topic and status", store.Match{Topic: kafkax.TopicTransactions, Status: store.StatusOpen}, []int64{id[4], id[0]}},
		{"nothing matches", store.Match{Topic: "aegis.nope"}, []int64{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			items, next, err := b.store.List(context.Background(), store.Filter{Match: tc.filter})
			require.NoError(t, err)
			require.Equal(t, tc.want, ids(items))
			require.Empty(t, next)
		})
	}
}

func TestListPagesWalkEveryRowOnceWhileRowsArrive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seeded := b.seed(t, fixture())
	ctx := context.Background()

	var seen []int64
	f := store.Filter{Limit: 2}
	for page := 0; ; page++ {
		require.Less(t, page, 10, "pagination does not end")
		items, next, err := b.store.List(ctx, f)
		require.NoError(t, err)
		require.LessOrEqual(t, len(items), 2)
		seen = append(seen, ids(items)...)
		if next == "" {
			break
		}
		// New dead letters land between page fetches.
		b.insert(t, seedRow{kafkax.TopicTransactions, "transient", store.StatusOpen, t0.Add(5 * time.Hour)})
		b.insert(t, seedRow{kafkax.TopicSettlements, "transient", store.StatusOpen, t0.Add(6 * time.Hour)})
		f.Cursor = next
	}
	require.Equal(t, []int64{seeded[4], seeded[3], seeded[2], seeded[1], seeded[0]}, seen)

	// A filtered walk that ends exactly on a page boundary has no empty
	// last page.
	items, next, err := b.store.List(ctx, store.Filter{Match: store.Match{Status: store.StatusOpen, Topic: kafkax.TopicWebhookPending}, Limit: 1})
	require.NoError(t, err)
	require.Equal(t, []int64{seeded[1]}, ids(items))
	require.Empty(t, next)
}

func TestListRejectsBadFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		filter store.Filter
		param  string
	}{
		{store.Filter{Match: store.Match{Status: "pending"}}, "status"},
		{store.Filter{Limit: input.MaxLimit + 1}, "limit"},
		{store.Filter{Limit: -1}, "limit"},
		{store.Filter{Cursor: "not a cursor"}, "cursor"},
		{store.Filter{Cursor: "LTE"}, "cursor"}, // base64 of "-1"
		{store.Filter{Match: store.Match{Since: t0, Until: t0}}, "until"},
	}
	for _, tc := range cases {
		_, _, err := b.store.List(context.Background(), tc.filter)
		var invalid *input.Invalid
		require.ErrorAs(t, err, &invalid, "%+v", tc.filter)
		require.Equal(t, tc.param, invalid.Param)
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.seed(t, fixture())
	ctx := context.Background()

	d, err := b.store.Get(ctx, id[2])
	require.NoError(t, err)
	require.Equal(t, id[2], d.ID)
	require.Equal(t, dlq.SourceConsumer, d.Source)
	require.Equal(t, kafkax.TopicTransactions, d.OriginalTopic)
	require.EqualValues(t, 0, *d.OriginalPartition)
	require.NotNil(t, d.OriginalOffset)
	require.Equal(t, "payout-worker", d.ConsumerGroup)
	require.Equal(t, store.StatusDiscarded, d.Status)
	require.Equal(t, "ops", *d.ResolvedBy)
	require.Equal(t, "test", *d.ResolutionReason)
	require.NotNil(t, d.ResolvedAt)
	require.True(t, d.FailedAt.Equal(t0.Add(2*time.Hour)))
	require.Equal(t, `{"payout_id":"p1"}`, string(d.Payload))
	require.Equal(t, len(d.Payload), d.PayloadBytes)
	require.JSONEq(t, `{"correlation_id":"c"}`, string(d.Headers))
	require.Contains(t, string(d.RetryHistory), `"boom"`)

	_, err = b.store.Get(ctx, id[4]+100)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestStats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seed(t, fixture())
	now := t0.Add(5 * time.Hour)

	st, err := b.store.Stats(context.Background(), now)
	require.NoError(t, err)
	require.Equal(t, now, st.AsOf)
	require.Equal(t, map[string]int64{"open": 3, "replayed": 1, "discarded": 1}, st.ByStatus)
	require.NotNil(t, st.OldestOpenAge)
	require.Equal(t, 5*time.Hour, *st.OldestOpenAge)

	byTopic := map[string]store.TopicStats{}
	var order []string
	for _, ts := range st.Topics {
		byTopic[ts.Topic] = ts
		order = append(order, ts.Topic)
	}
	require.Equal(t, []string{kafkax.TopicSettlements, kafkax.TopicTransactions, kafkax.TopicWebhookPending}, order)
	tx := byTopic[kafkax.TopicTransactions]
	require.Equal(t, map[string]int64{"open": 2, "replayed": 0, "discarded": 1}, tx.ByStatus)
	require.Equal(t, 5*time.Hour, *tx.OldestOpenAge)
	require.Equal(t, 4*time.Hour, *byTopic[kafkax.TopicWebhookPending].OldestOpenAge)
	require.Equal(t, map[string]int64{"open": 0, "replayed": 1, "discarded": 0}, byTopic[kafkax.TopicSettlements].ByStatus)
	require.Nil(t, byTopic[kafkax.TopicSettlements].OldestOpenAge, "nothing open, no age")

	// An open letter stamped in the future (a producer's clock ahead) has
	// age zero, not a negative one.
	empty := setup(t)
	empty.insert(t, seedRow{kafkax.TopicTransactions, "transient", store.StatusOpen, now.Add(time.Minute)})
	st, err = empty.store.Stats(context.Background(), now)
	require.NoError(t, err)
	require.Equal(t, time.Duration(0), *st.OldestOpenAge)

	st, err = setup(t).store.Stats(context.Background(), now)
	require.NoError(t, err)
	require.Nil(t, st.OldestOpenAge)
	require.Empty(t, st.Topics)
	require.Equal(t, map[string]int64{"open": 0, "replayed": 0, "discarded": 0}, st.ByStatus)
}
