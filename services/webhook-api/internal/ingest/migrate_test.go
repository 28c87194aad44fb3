package ingest_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
)

// backlog is the rows webhook_events holds before it is partitioned.
const backlog = 200_000

// webhook_events is partitioned (migrations 000045 to 000048 and 000056) on a table
// with a backlog while ingest keeps saving webhooks through the real store,
// on both commit paths: no save fails, every row is there after the swap,
// the backlog is the legacy partition, and an old event is still a
// duplicate, before the cutover (in the legacy partition) and after it (in
// a daily partition, through the keys recorded before the swap).
func TestPartitioningWhileIngestRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 200k-row table")
	}
	ctx := context.Background()
	dbURL := pgtest.Empty(t)
	// 000044 makes the function ingest's multi-row insert calls: the
	// release with this code migrates to it first (docs/operations/
	// partition-webhook-events.md), then 000045 to 000048 and 000056 run under it.
	require.NoError(t, migrations.UpTo(dbURL, 44))
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `INSERT INTO webhook_events (provider, event_id, event_type, payload, correlation_id, received_at)
		SELECT 'stripe', 'evt_old_' || i, 'payment_intent.succeeded', jsonb_build_object('id', 'evt_old_' || i), 'corr-old',
		       now() - i * interval '10 seconds'
		FROM generate_series(1, $1::int) i`, backlog)
	require.NoError(t, err)

	store := ingest.NewStore(pool, noNotify{}, time.Now)
	var (
		stop      atomic.Bool
		saved     sync.Map // event id -> outcome
		failures  atomic.Int64
		firstErr  atomic.Value
		slowest   atomic.Int64
		wg        sync.WaitGroup
		migrating atomic.Bool
	)
	migrating.Store(true)
	for w := range 2 {
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				p := credit(fmt.Sprintf("evt_live_%d_%d", w, n), fmt.Sprintf("pi_live_%d_%d", w, n), 0)
				if n%5 == 0 {
					p.Event.Problem = "metadata.user_id is missing" // the general path
				}
				start := time.Now()
				s, err := store.Save(ctx, p)
				if d := time.Since(start); migrating.Load() && d.Nanoseconds() > slowest.Load() {
					slowest.Store(d.Nanoseconds())
				}
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				saved.Store(p.Event.Event.EventID, s.Outcome)
			}
		})
	}
	start := time.Now()
	_, err = migrations.Up(dbURL)
	took := time.Since(start)
	migrating.Store(false)
	require.NoError(t, err)
	// Ingest goes on on the partitioned table.
	var before int
	saved.Range(func(any, any) bool { before++; return true })
	t.Logf("%d webhooks saved while the migrations ran", before)
	require.Eventually(t, func() bool {
		n := 0
		saved.Range(func(any, any) bool { n++; return true })
		return n > before+50
	}, 30*time.Second, 10*time.Millisecond, "ingest does not go on after the migration")
	stop.Store(true)
	wg.Wait()
	t.Logf("migrations 000045-000048 and 000056 on %d rows took %s; the slowest save during them %s", backlog, took, time.Duration(slowest.Load()))

	require.Zero(t, failures.Load(), "saves failed while the table was partitioned: %v", firstErr.Load())
	var live []string
	saved.Range(func(k, v any) bool {
		require.Contains(t, []ingest.Outcome{ingest.Accepted, ingest.DeadLettered}, v, k)
		live = append(live, k.(string))
		return true
	})
	var stored, old, legacy int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE event_id = ANY($1)`, live).Scan(&stored))
	require.Equal(t, len(live), stored, "every saved webhook is stored")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE event_id LIKE 'evt_old_%'`).Scan(&old))
	require.Equal(t, backlog, old, "the backlog is all there")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM webhook_events_legacy WHERE event_id LIKE 'evt_old_%'`).Scan(&legacy))
	require.Equal(t, backlog, legacy, "the backlog is the legacy partition")
	var partitioned bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT relkind = 'p' FROM pg_class WHERE oid = 'webhook_events'::regclass`).Scan(&partitioned))
	require.True(t, partitioned)

	// evt_old_1 was received 10 seconds before the backlog was written:
	// within the horizon, a duplicate on both paths.
	dup, err := store.Save(ctx, credit("evt_old_1", "pi_old_1", 0))
	require.NoError(t, err)
	require.Equal(t, ingest.Duplicate, dup.Outcome)
	many := store.SaveGroup(ctx, []ingest.Pending{credit("evt_old_2", "pi_old_2", 0), credit("evt_new_x", "pi_new_x", 0)})
	require.Equal(t, []ingest.Outcome{ingest.Duplicate, ingest.Accepted}, outcomes(t, many))

	// After the cutover a retry lands in a daily partition, where only
	// webhook_event_keys knows the key: the backlog's keys of the horizon
	// (recorded by 000048) and those saved while the migrations ran (000047's
	// trigger, then the dedupe's) are there.
	var cutover time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(hi) FROM partition_bounds('webhook_events') WHERE lo IS NULL`).Scan(&cutover))
	later := ingest.NewStore(pool, noNotify{}, at(cutover.Add(time.Hour)))
	for _, id := range []string{"evt_old_3", live[0], live[len(live)-1]} {
		s, err := later.Save(ctx, credit(id, "pi_"+id, 0))
		require.NoError(t, err, id)
		require.Equal(t, ingest.Duplicate, s.Outcome, "%s retried after the cutover", id)
	}
	s, err := later.Save(ctx, credit("evt_after_cutover", "pi_after_cutover", 0))
	require.NoError(t, err)
	require.Equal(t, ingest.Accepted, s.Outcome)
	require.Equal(t, "webhook_events_p"+cutover.UTC().Format("20060102"), partitionOf(t, &pgtest.DB{Pool: pool}, "evt_after_cutover"))
}
