package ingest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
)

// boundary is midnight UTC five days from today: the border of two daily
// partitions of webhook_events (made 14 days ahead; pgtest keeps them
// current), whatever day the test database was migrated.
func boundary() time.Time {
	return time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 5)
}

func at(t time.Time) func() time.Time { return func() time.Time { return t } }

// partitionOf is the partition webhook_events keeps (provider, eventID) in.
func partitionOf(t *testing.T, db *pgtest.DB, eventID string) string {
	t.Helper()
	var p string
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT tableoid::regclass::text FROM webhook_events WHERE provider = 'stripe' AND event_id = $1`, eventID).Scan(&p))
	return p
}

func counts(t *testing.T, db *pgtest.DB, eventID string) (events, outboxRows, letters int) {
	t.Helper()
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM webhook_events WHERE provider = 'stripe' AND event_id = $1),
		(SELECT count(*) FROM transaction_outbox WHERE headers ->> 'message_id' = 'stripe:' || $1),
		(SELECT count(*) FROM dead_letters WHERE correlation_id = 'corr-' || $1)`, eventID).Scan(&events, &outboxRows, &letters))
	return events, outboxRows, letters
}

// webhook_events is partitioned by day on received_at and (provider,
// event_id) is unique only within a partition: a PSP retry that arrives
// just after midnight, in the next partition, is still a duplicate,
// answered so, with no second row, outbox row or dead letter. Both commit
// paths: a credit (the one round trip multi-row insert) and an event with
// a problem (the general path, dead-lettered).
func TestDuplicateJustAfterAPartitionBoundaryIsADuplicate(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	b := boundary()
	before := ingest.NewStore(db.Pool, noNotify{}, at(b.Add(-time.Second)))
	after := ingest.NewStore(db.Pool, noNotify{}, at(b.Add(time.Second)))

	problem := credit("evt_problem", "pi_problem", 0)
	problem.Event.Problem = "metadata.user_id is missing"
	for _, c := range []struct {
		name string
		p    ingest.Pending
		want ingest.Outcome
	}{
		{"credit, one round trip", credit("evt_credit", "pi_credit", 0), ingest.Accepted},
		{"dead-lettered, general path", problem, ingest.DeadLettered},
	} {
		id := c.p.Event.Event.EventID
		first, err := before.Save(ctx, c.p)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, first.Outcome, c.name)
		require.Equal(t, "webhook_events_p"+b.AddDate(0, 0, -1).Format("20060102"), partitionOf(t, db, id),
			"%s: stored in the partition of the day before the boundary", c.name)

		second, err := after.Save(ctx, c.p)
		require.NoError(t, err, c.name)
		require.Equal(t, ingest.Duplicate, second.Outcome, "%s: the retry after the boundary", c.name)
		events, rows, letters := counts(t, db, id)
		require.Equal(t, 1, events, "%s: one row", c.name)
		require.Equal(t, 1, rows+letters, "%s: one outbox row or dead letter, none for the duplicate", c.name)
	}
}

// The dedupe holds under concurrency: an insert of a key waits for a
// transaction that inserted the same key in the partition before the
// boundary and, once that commits, is a duplicate (the trigger's insert of
// the key into webhook_event_keys waits on the key's unique index entry,
// then sees the committed key).
func TestConcurrentInsertAcrossABoundaryWaitsAndIsADuplicate(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	b := boundary()
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO webhook_events (provider, event_id, event_type, payload, correlation_id, received_at)
		VALUES ('stripe', 'evt_race', 'payment_intent.succeeded', '{}', 'corr-evt_race', $1)`, b.Add(-time.Millisecond))
	require.NoError(t, err)

	after := ingest.NewStore(db.Pool, noNotify{}, at(b.Add(time.Millisecond)))
	done := make(chan ingest.Saved, 1)
	go func() {
		s, _ := after.Save(ctx, credit("evt_race", "pi_race", 0))
		done <- s
	}()
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted)`).Scan(&waiting))
		return waiting
	}, 10*time.Second, 5*time.Millisecond, "the second insert does not wait for the first")
	require.NoError(t, tx.Commit(ctx))
	s := <-done
	require.NoError(t, s.Err)
	require.Equal(t, ingest.Duplicate, s.Outcome)
	events, rows, _ := counts(t, db, "evt_race")
	require.Equal(t, 1, events)
	require.Zero(t, rows, "no outbox row for the duplicate")
	require.Equal(t, "webhook_events_p"+b.AddDate(0, 0, -1).Format("20060102"), partitionOf(t, db, "evt_race"))
}

// Two stores on either side of a boundary race each key: one row and one
// outbox row per key, one Accepted and one Duplicate, whichever wins.
func TestConcurrentSavesOfOneKeyAcrossABoundaryStoreOne(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	b := boundary()
	stores := []*ingest.Store{
		ingest.NewStore(db.Pool, noNotify{}, at(b.Add(-time.Millisecond))),
		ingest.NewStore(db.Pool, noNotify{}, at(b.Add(time.Millisecond))),
	}
	const keys = 20
	for k := range keys {
		id := fmt.Sprintf("evt_both_%d", k)
		var (
			wg  sync.WaitGroup
			out [2]ingest.Saved
		)
		for i, s := range stores {
			wg.Go(func() { out[i], _ = s.Save(ctx, credit(id, "pi_both", 0)) })
		}
		wg.Wait()
		require.NoError(t, out[0].Err)
		require.NoError(t, out[1].Err)
		require.ElementsMatch(t, []ingest.Outcome{ingest.Accepted, ingest.Duplicate}, []ingest.Outcome{out[0].Outcome, out[1].Outcome}, id)
		events, rows, _ := counts(t, db, id)
		require.Equal(t, 1, events, id)
		require.Equal(t, 1, rows, id)
	}
}

// A webhook whose day has no partition (the keeper has not made one) fails
// loudly and stores nothing: not a dead letter and not ErrUnstorable (the
// API's 400), but an error the API answers 503, so the PSP retries it once
// the partition exists.
func TestWebhookWithNoPartitionFailsAndIsRetried(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	far := ingest.NewStore(db.Pool, noNotify{}, at(time.Now().AddDate(1, 0, 0)))
	problem := credit("evt_far_problem", "pi_far_problem", 0)
	problem.Event.Problem = "metadata.user_id is missing"
	for _, p := range []ingest.Pending{credit("evt_far", "pi_far", 0), problem} {
		id := p.Event.Event.EventID
		_, err := far.Save(ctx, p)
		require.Error(t, err, id)
		require.NotErrorIs(t, err, ingest.ErrUnstorable, id)
		require.True(t, database.NoPartition(err), "%s: %v", id, err)
		events, rows, letters := counts(t, db, id)
		require.Zero(t, events+rows+letters, "%s: nothing stored", id)
	}
}
