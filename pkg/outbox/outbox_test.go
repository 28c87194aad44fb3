package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/outbox/sqlcdb"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

func msg(key string, n int) outbox.Message {
	return outbox.Message{
		Topic: "aegis.webhook.pending", EventType: "test.event", PartitionKey: key,
		Payload: []byte(fmt.Sprintf(`{"n":%d}`, n)), Headers: map[string]string{"event_type": "test.event"},
		CorrelationID: fmt.Sprintf("c-%s-%d", key, n),
	}
}

func insert(t *testing.T, db *pgtest.DB, msgs ...outbox.Message) []int64 {
	t.Helper()
	var ids []int64
	err := database.InTx(context.Background(), db.Pool, func(tx pgx.Tx) error {
		for _, m := range msgs {
			id, err := outbox.Insert(context.Background(), tx, m)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	require.NoError(t, err)
	return ids
}

func ids(rows []outbox.Row) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func TestInsertRollsBackWithTheBusinessWrite(t *testing.T) {
	t.Parallel()
	outer := pgtest.Tx(t)
	ctx := context.Background()
	// The business write's transaction: a savepoint of the test's.
	tx, err := outer.Begin(ctx)
	require.NoError(t, err)
	_, err = outbox.Insert(ctx, tx, msg(t.Name(), 1))
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx), "the business write failed")
	var n int
	require.NoError(t, outer.QueryRow(ctx, "SELECT count(*) FROM transaction_outbox").Scan(&n))
	require.Zero(t, n, "a rolled-back transaction must leave no outbox row")

	_, err = outbox.Insert(ctx, nil, outbox.Message{Topic: "t", EventType: "e", Payload: []byte("{not json")})
	require.ErrorContains(t, err, "not valid JSON")
}

func TestClaimHandsOutHeadsFirstThenRunsInOrderAndHoldsBackBehindFailures(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	store := outbox.NewStore(db.Pool)

	a := insert(t, db, msg("A", 1), msg("A", 2), msg("A", 3))
	b := insert(t, db, msg("B", 1), msg("B", 2))
	now := time.Now()

	// The heads of A and B first; the room they leave goes to the next
	// position of each key (A's, the older), never to A's third row before B's
	// second.
	got, err := store.Claim(ctx, now, 3, time.Minute, "relay-1")
	require.NoError(t, err)
	require.Equal(t, []int64{a[0], a[1], b[0]}, ids(got))
	require.Equal(t, "A", got[0].PartitionKey)
	require.JSONEq(t, `{"n":1}`, string(got[0].Payload))
	require.Equal(t, "test.event", got[0].Headers["event_type"])

	// While they are in flight nothing else of A or B is due, not even the
	// rows behind the runs: only the holder of a key's head takes its rows.
	again, err := store.Claim(ctx, now, 100, time.Minute, "relay-2")
	require.NoError(t, err)
	require.Empty(t, again)

	// A's head fails and waits for its retry; its run's second row is handed
	// back. A stays blocked, B moves on.
	n, err := store.Retry(ctx, a[0], "relay-1", errors.New("broker down"), "transient", now.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, store.Release(ctx, []int64{a[1]}, "relay-1", now))
	deleted, err := store.DeletePublished(ctx, []int64{b[0]}, "relay-1")
	require.NoError(t, err)
	require.EqualValues(t, 1, deleted)

	got, err = store.Claim(ctx, now, 100, time.Minute, "relay-1")
	require.NoError(t, err)
	require.Equal(t, []int64{b[1]}, ids(got), "B continues; A is held behind its failing head")
	_, err = store.DeletePublished(ctx, []int64{b[1]}, "relay-1")
	require.NoError(t, err)

	// When A's retry is due, A's head comes back first, with its count, and
	// the rest of A behind it.
	got, err = store.Claim(ctx, now.Add(2*time.Hour), 100, time.Minute, "relay-1")
	require.NoError(t, err)
	require.Equal(t, a, ids(got))
	require.Equal(t, 1, got[0].RetryCount)
}

func TestClaimRunStopsAtTheFirstRowNotDue(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	store := outbox.NewStore(db.Pool)
	now := time.Now()

	later := msg("H", 3)
	later.NotBefore = now.Add(time.Hour)
	h := insert(t, db, msg("H", 1), msg("H", 2), later, msg("H", 4))

	got, err := store.Claim(ctx, now.Add(time.Minute), 100, time.Minute, "relay-1")
	require.NoError(t, err)
	require.Equal(t, h[:2], ids(got), "the run ends before the scheduled row; the row behind it waits too")
	_, err = store.DeletePublished(ctx, ids(got), "relay-1")
	require.NoError(t, err)

	got, err = store.Claim(ctx, now.Add(time.Minute), 100, time.Minute, "relay-1")
	require.NoError(t, err)
	require.Empty(t, got, "the key's head is not due yet")

	got, err = store.Claim(ctx, now.Add(2*time.Hour), 100, time.Minute, "relay-1")
	require.NoError(t, err)
	require.Equal(t, h[2:], ids(got))
}

func TestClaimTakesAHotKeyAsABatch(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	store := outbox.NewStore(db.Pool)
	var ms []outbox.Message
	for i := range 250 {
		ms = append(ms, msg("hot", i))
	}
	want := insert(t, db, ms...)

	var got []int64
	for cycle := 0; len(got) < len(want); cycle++ {
		require.Less(t, cycle, 3, "a hot key drains a full batch per claim")
		rows, err := store.Claim(ctx, time.Now(), 100, time.Minute, "relay-1")
		require.NoError(t, err)
		require.NotEmpty(t, rows)
		got = append(got, ids(rows)...)
		_, err = store.DeletePublished(ctx, ids(rows), "relay-1")
		require.NoError(t, err)
	}
	require.Equal(t, want, got, "in id order, every row once")
}

func TestExpiredLeaseIsReclaimedAndTheOldOwnerCannotSettle(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	store := outbox.NewStore(db.Pool)
	id := insert(t, db, msg("K", 1))[0]
	now := time.Now()

	got, err := store.Claim(ctx, now, 10, 30*time.Second, "dead-relay")
	require.NoError(t, err)
	require.Len(t, got, 1)

	// Before the lease ends nobody else may take it; after, it is due again.
	got, err = store.Claim(ctx, now.Add(10*time.Second), 10, 30*time.Second, "relay-2")
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = store.Claim(ctx, now.Add(31*time.Second), 10, 30*time.Second, "relay-2")
	require.NoError(t, err)
	require.Equal(t, []int64{id}, ids(got))

	n, err := store.DeletePublished(ctx, []int64{id}, "dead-relay")
	require.NoError(t, err)
	require.Zero(t, n, "the relay that lost its lease must not settle the row")
	_, err = store.Retry(ctx, id, "dead-relay", errors.New("x"), "transient", now)
	require.ErrorIs(t, err, outbox.ErrLeaseLost)
	n, err = store.DeletePublished(ctx, []int64{id}, "relay-2")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}

func TestConcurrentClaimersNeverShareARowOrAKey(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	store := outbox.NewStore(db.Pool)

	const keys, perKey = 20, 10
	for k := range keys {
		var ms []outbox.Message
		for i := range perKey {
			ms = append(ms, msg(fmt.Sprintf("key-%02d", k), i))
		}
		insert(t, db, ms...)
	}

	const workers = 4
	var (
		mu      sync.Mutex
		seen    = map[int64]int{}
		order   = map[string][]int64{}
		holder  = map[string]string{}
		wg      sync.WaitGroup
		failure error
		// claims counts the claims made; holding, the claimers holding
		// rows they have not settled yet; settled, the rows settled.
		claims, holding, settled int
		changed                  = sync.NewCond(&mu)
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		failure = err
		settled = keys * perKey // the others stop too
		changed.Broadcast()
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("relay-%d", w)
			for {
				mu.Lock()
				done := settled == keys*perKey
				mu.Unlock()
				if done {
					return
				}
				rows, err := store.Claim(ctx, time.Now(), 7, time.Minute, owner)
				if err != nil {
					fail(err)
					return
				}
				mu.Lock()
				claims++
				changed.Broadcast()
				if len(rows) == 0 {
					mu.Unlock()
					continue
				}
				for _, r := range rows {
					seen[r.ID]++
					if o, ok := holder[r.PartitionKey]; ok && o != owner {
						failure = fmt.Errorf("key %s held by %s and %s at once", r.PartitionKey, o, owner)
					}
					holder[r.PartitionKey] = owner
					order[r.PartitionKey] = append(order[r.PartitionKey], r.ID)
				}
				// In flight: hold the rows until another claimer has
				// tried the keys (or every claimer holds rows).
				holding++
				for from := claims; claims == from && holding < workers && settled < keys*perKey; {
					changed.Wait()
				}
				holding--
				// Settled while the keys are still marked held, so another
				// claimer that gets them must have seen them settled.
				_, err = store.DeletePublished(ctx, ids(rows), owner)
				for _, r := range rows {
					delete(holder, r.PartitionKey)
				}
				if err == nil {
					settled += len(rows)
				}
				changed.Broadcast()
				mu.Unlock()
				if err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, failure)
	require.Len(t, seen, keys*perKey, "every row claimed")
	rows, err := store.Claim(ctx, time.Now(), 7, time.Minute, "relay-last")
	require.NoError(t, err)
	require.Empty(t, rows, "a settled row was handed out again")
	for id, n := range seen {
		require.Equal(t, 1, n, "row %d claimed %d times", id, n)
	}
	for key, got := range order {
		for i := 1; i < len(got); i++ {
			require.Less(t, got[i-1], got[i], "key %s handed out out of order: %v", key, got)
		}
	}
}

func TestWritersOfOneKeySerializeSoIdOrderIsCommitOrder(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()

	tx1, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx1.Rollback(ctx)
	id1, err := outbox.Insert(ctx, tx1, msg("wallet-1", 1))
	require.NoError(t, err)

	// A second writer of the same key waits for the first to commit...
	type result struct {
		id  int64
		err error
	}
	done := make(chan result, 1)
	conn, err := db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var pid uint32
	require.NoError(t, conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	go func() {
		var id int64
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var err error
			id, err = outbox.Insert(ctx, tx, msg("wallet-1", 2))
			return err
		})
		done <- result{id, err}
	}()
	require.Eventually(t, func() bool {
		var waiting bool
		err := db.Pool.QueryRow(ctx,
			"SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND NOT granted)", pid).Scan(&waiting)
		return err == nil && waiting
	}, 10*time.Second, 10*time.Millisecond, "second writer of the key should wait on the key lock")

	// ...while a writer of another key does not.
	insert(t, db, msg("wallet-2", 1))

	require.NoError(t, tx1.Commit(ctx))
	r := <-done
	require.NoError(t, r.err)
	require.Greater(t, r.id, id1, "the later committer of a key gets the later id")
}

func TestQueueWritesManyRowsInMessageOrder(t *testing.T) {
	t.Parallel()
	tx := pgtest.Tx(t)
	ctx := context.Background()
	var msgs []outbox.Message
	for n := range 40 {
		msgs = append(msgs, msg(fmt.Sprintf("%s-wallet-%d", t.Name(), (n*7)%5), n)) // keys interleaved
	}
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	msgs[3].MaxRetries, msgs[3].NotBefore = 2, later
	got := make([]int64, len(msgs))
	b := &pgx.Batch{}
	require.NoError(t, outbox.Queue(ctx, b, msgs, got))
	require.NoError(t, tx.SendBatch(ctx, b).Close())
	for i := 1; i < len(got); i++ {
		require.Less(t, got[i-1], got[i], "ids are drawn in message order")
	}
	for i, id := range got {
		var n, maxRetries int
		var key, corr, header string
		var due time.Time
		require.NoError(t, tx.QueryRow(ctx, `SELECT (payload->>'n')::int, partition_key, correlation_id, headers->>'event_type', max_retries, next_retry_at
			FROM transaction_outbox WHERE id = $1`, id).Scan(&n, &key, &corr, &header, &maxRetries, &due))
		require.Equal(t, i, n, "row %d holds message %d", id, i)
		require.Equal(t, msgs[i].PartitionKey, key)
		require.Equal(t, msgs[i].CorrelationID, corr)
		require.Equal(t, "test.event", header)
		if i == 3 {
			require.Equal(t, 2, maxRetries)
			require.True(t, due.Equal(later), "NotBefore %v stored as %v", later, due)
		} else {
			require.Equal(t, 6, maxRetries, "default publish attempts")
			require.WithinDuration(t, time.Now(), due, time.Minute, "due at once by default")
		}
	}

	b = &pgx.Batch{}
	require.ErrorContains(t, outbox.Queue(ctx, b, msgs, make([]int64, 2)), "2 ids for 40 messages")
	require.ErrorContains(t, outbox.Queue(ctx, b, []outbox.Message{{Topic: "t", EventType: "e", Payload: []byte("nope")}}, nil), "not valid JSON")
	require.Zero(t, b.Len(), "a refused message queues nothing")
}

// Two writers whose key sets overlap, given in opposite orders, take the
// key locks in one order: neither deadlocks (Postgres would abort one).
func TestQueueWritersOfOverlappingKeysDoNotDeadlock(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	keys := []string{"k-a", "k-b", "k-c", "k-d", "k-e", "k-f"}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 25 {
				var msgs []outbox.Message
				for i := range keys {
					k := keys[i]
					if w%2 == 1 {
						k = keys[len(keys)-1-i]
					}
					msgs = append(msgs, msg(k, round))
				}
				err := database.InTx(ctx, db.Pool, func(tx pgx.Tx) error {
					b := &pgx.Batch{}
					if err := outbox.Queue(ctx, b, msgs, nil); err != nil {
						return err
					}
					// Hold the locks a little, as a group commit does.
					b.Queue("SELECT pg_sleep(0.001)")
					return tx.SendBatch(ctx, b).Close()
				})
				if err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM transaction_outbox").Scan(&n))
	require.Equal(t, 8*25*len(keys), n)
}

func TestStats(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	store := outbox.NewStore(db.Pool)
	st, err := store.Stats(ctx, time.Now())
	require.NoError(t, err)
	require.Zero(t, st.Unfinished)
	insert(t, db, msg("a", 1), msg("b", 1))
	st, err = store.Stats(ctx, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Unfinished)
	require.InDelta(t, time.Minute.Seconds(), st.OldestAge.Seconds(), 5)
}

func TestNotifierWakesListenersAfterCommitAndCoalesces(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := db.Listen(t, outbox.NotifyChannel)

	n := outbox.NewNotifier(db.Pool, 50*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for range 100 {
		n.Notify() // a burst of commits, before the notifier gets to run
	}
	done := make(chan struct{})
	go func() { _ = n.Run(ctx); close(done) }() // Run ends with ctx; the test asserts on what it delivered
	require.NoError(t, wait(5*time.Second), "a listener is woken")
	// The burst was folded: no second notification is queued right behind.
	require.Error(t, wait(200*time.Millisecond), "a burst of Notify calls sends one NOTIFY")
	cancel()
	<-done
}

func TestQueueNotifyWakesListenersInTheWritersRoundTrip(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := db.Listen(t, outbox.NotifyChannel)

	n := outbox.NewNotifier(db.Pool, 300*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	conn, err := db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	require.NoError(t, outbox.Queue(ctx, b, []outbox.Message{msg("wallet-1", 1)}, nil))
	b.Queue("COMMIT")
	require.True(t, n.QueueNotify(b), "the first writer carries the notification")
	require.False(t, n.QueueNotify(&pgx.Batch{}), "one notification per interval")
	require.NoError(t, conn.SendBatch(ctx, b).Close())
	// Nothing runs the notifier: the writer's own pipeline woke the listener.
	require.NoError(t, wait(5*time.Second), "a listener is woken by the pipelined NOTIFY")

	// A writer that was refused asks the notifier, which sends once the
	// interval has passed.
	done := make(chan struct{})
	go func() { _ = n.Run(ctx); close(done) }() // Run ends with ctx; the test asserts on what it delivered
	n.Notify()
	require.NoError(t, wait(5*time.Second), "the notifier sends for the writer that could not")
	require.Error(t, wait(400*time.Millisecond), "and nothing more")
	cancel()
	<-done
}

// A claim looks for heads in a window of the backlog, so its cost is
// bounded by the window, not the backlog; the claimer's cursor moves the
// window on when it yields less than a batch, so keys behind a window of
// blocked rows (here a key whose head waits an hour for its retry) are
// reached by the next claim, and it comes back to the front once it reaches
// the end.
func TestClaimFromMovesPastAWindowOfBlockedRows(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	store := outbox.NewStore(db.Pool)
	window := outbox.ClaimWindow(10)
	var stuck []outbox.Message
	for i := range window + 200 {
		stuck = append(stuck, msg("stuck", i))
	}
	stuckIDs := insert(t, db, stuck...)
	_, err := db.Pool.Exec(ctx, `UPDATE transaction_outbox SET status = 'failed', retry_count = 1, next_retry_at = now() + interval '1 hour'
		WHERE id = $1`, stuckIDs[0])
	require.NoError(t, err)
	var others []outbox.Message
	for i := range 5 {
		others = append(others, msg(fmt.Sprintf("other-%d", i), 0))
	}
	otherIDs := insert(t, db, others...)

	now := time.Now()
	got, err := store.Claim(ctx, now, 10, time.Minute, "relay-1")
	require.NoError(t, err)
	require.Empty(t, got, "the front window holds only the blocked key's rows")

	var c outbox.Cursor
	got, err = store.ClaimFrom(ctx, &c, now, 10, time.Minute, "relay-1")
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = store.ClaimFrom(ctx, &c, now, 10, time.Minute, "relay-1")
	require.NoError(t, err)
	require.Equal(t, otherIDs, ids(got), "the next window: the other keys' heads, none of the blocked key's rows")

	// The end was reached: the cursor is back at the front, where a row of
	// a key that became due is taken.
	_, err = db.Pool.Exec(ctx, `UPDATE transaction_outbox SET next_retry_at = now() - interval '1 second' WHERE id = $1`, stuckIDs[0])
	require.NoError(t, err)
	got, err = store.ClaimFrom(ctx, &c, now, 10, time.Minute, "relay-1")
	require.NoError(t, err)
	require.Equal(t, stuckIDs[:10], ids(got), "the blocked key, due again: its head and the run behind it, from the front")
}

// With many keys behind their heads, the room the heads leave is shared
// position by position: each key's head and its next row, never one key's
// whole backlog read behind every head.
func TestClaimSharesTheRoomAmongTheKeysWithRuns(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO transaction_outbox (topic, event_type, partition_key, payload)
		SELECT 'aegis.webhook.pending', 'bench', 'user-' || (i % 100), jsonb_build_object('i', i)
		FROM generate_series(0, 999) i`)
	require.NoError(t, err)
	got, err := outbox.NewStore(db.Pool).Claim(ctx, time.Now(), 200, time.Minute, "relay-1")
	require.NoError(t, err)
	require.Len(t, got, 200)
	perKey := map[string][]int64{}
	for _, r := range got {
		perKey[r.PartitionKey] = append(perKey[r.PartitionKey], r.ID)
	}
	require.Len(t, perKey, 100, "every key's head")
	for k, ids := range perKey {
		require.Len(t, ids, 2, "%s: its head and the row behind it", k)
	}
}

// requireKeyLookups fails unless every scan of the primary key in plan is a
// look-up (it has an Index Cond): a scan without one reads the whole table.
func requireKeyLookups(t *testing.T, plan string) {
	t.Helper()
	lines := strings.Split(plan, "\n")
	for i, l := range lines {
		if strings.Contains(l, "using transaction_outbox_pkey") {
			require.True(t, i+1 < len(lines) && strings.Contains(lines[i+1], "Index Cond"), "a scan of the whole primary key:\n%s", plan)
		}
	}
}

// requireBatchWalk requires the shape of a claim whose cost is its batch's,
// whatever the statistics say: the claim index walked for the window and
// for the unfinished rows in it, each key looked up in the key index (the
// head probe, the row behind each head, the run), the batch's own order
// the only sort, no hash of the table, no JIT.
func requireBatchWalk(t *testing.T, mode, plan string) {
	t.Helper()
	require.Equal(t, 2, strings.Count(plan, "using transaction_outbox_claim_idx"), "%s: the window and the walk of unfinished rows in it:\n%s", mode, plan)
	requireKeyLookups(t, plan)
	require.Equal(t, 3, strings.Count(plan, "using transaction_outbox_unfinished_key_idx"), "%s: the head probe, the probe for a row behind each head, and the run:\n%s", mode, plan)
	require.Equal(t, 1, strings.Count(plan, "Sort Key"), "%s: only the batch's own order is sorted, never the backlog:\n%s", mode, plan)
	require.NotContains(t, plan, "Hash Join", "%s: the batch is joined to its rows by id, not by hashing the table", mode)
	require.NotContains(t, plan, "JIT", "%s: a claim is never compiled", mode)
}

// insertBacklog inserts n unfinished rows of 1 KiB over 1000 keys.
func insertBacklog(t *testing.T, db *pgtest.DB, n int) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `
		INSERT INTO transaction_outbox (topic, event_type, partition_key, payload)
		SELECT 'aegis.webhook.pending', 'bench', 'user-' || (i % 1000), jsonb_build_object('i', i, 'pad', repeat('x', 1000))
		FROM generate_series(1, $1::int) i`, n)
	require.NoError(t, err)
}

// forEachPlanMode hands check Claim's custom plan and its generic plan on
// pool (the one a prepared statement may settle on).
func forEachPlanMode(t *testing.T, pool *pgxpool.Pool, now time.Time, check func(mode, plan string)) {
	t.Helper()
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		_, err := pool.Exec(context.Background(), "SET plan_cache_mode = "+mode)
		require.NoError(t, err)
		check(mode, claimPlan(t, pool, now))
	}
}

// storePool is a one-connection pool on the store's settings.
func storePool(t *testing.T, db *pgtest.DB) *pgxpool.Pool {
	t.Helper()
	pool, err := database.Connect(context.Background(), db.URL, database.Options{MaxConns: 1, Settings: outbox.StoreSettings()})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// claimsTheFirstBatch requires a claim of 2000 on a backlog of 1000 keys or
// more to hand out the backlog's first 2000 rows, in id order.
func claimsTheFirstBatch(t *testing.T, pool *pgxpool.Pool, now time.Time) {
	t.Helper()
	got, err := outbox.NewStore(pool).Claim(context.Background(), now, 2000, time.Minute, "relay-1")
	require.NoError(t, err)
	require.Len(t, got, 2000)
	require.Equal(t, got[0].ID+1999, got[len(got)-1].ID, "the backlog's first 2000 rows")
}

// claimPlan is Claim's plan for a batch of 2000 at now on pool.
func claimPlan(t *testing.T, pool *pgxpool.Pool, now time.Time) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "EXPLAIN "+sqlcdb.Claim, int64(0), outbox.ClaimWindow(2000), now, 2000, "relay-1", now.Add(time.Minute))
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// A backlog that arrived since the last analyze must not turn Claim into a
// read of every unfinished row: on the store's settings it walks the index
// of unfinished rows in id order and stops after the batch.
func TestClaimWalksTheIndexOnABacklogWithoutStatistics(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO transaction_outbox (topic, event_type, partition_key, payload)
		SELECT 'aegis.webhook.pending', 'bench', 'user-' || (i % 2000), jsonb_build_object('i', i, 'pad', repeat('x', 1000))
		FROM generate_series(1, 20000) i`)
	require.NoError(t, err)
	pool := storePool(t, db)
	now := time.Now()
	plan := claimPlan(t, pool, now)
	require.Contains(t, plan, "Index Scan using transaction_outbox_claim_idx", plan)
	require.NotContains(t, plan, "Bitmap Heap Scan", plan)

	// And the store on that pool claims the first batch in id order.
	claimsTheFirstBatch(t, pool, now)
}

// A VACUUM while nothing is unfinished leaves the queue's partial indexes
// with a tuple count of 0. A backlog that arrives after it must still be
// claimed by one walk of the claim index, each key looked up in the key's
// index, in the generic plan the relay's prepared statement settles on:
// when both indexes served both look-ups, the planner took the id index for
// the key look-ups too and read the whole backlog per candidate (5 s a
// claim on 20k rows).
func TestClaimLooksKeysUpInTheirIndexAfterAVacuumOfAnEmptyQueue(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO transaction_outbox (topic, event_type, partition_key, payload, status, processed_at, finished_at)
		SELECT 'aegis.webhook.pending', 'bench', 'user-' || (i % 1000), jsonb_build_object('i', i), 'processed', now(), now()
		FROM generate_series(1, 20000) i`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, "VACUUM ANALYZE transaction_outbox")
	require.NoError(t, err)
	insertBacklog(t, db, 20000)

	pool := storePool(t, db)
	_, err = pool.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	now := time.Now()
	requireBatchWalk(t, "generic", claimPlan(t, pool, now))

	claimsTheFirstBatch(t, pool, now)
}

// Published rows are deleted, so the queue is often empty when autovacuum
// analyzes it: its statistics then say no row, whatever the table's size.
// A burst that arrives before the next analyze must still be claimed by one
// walk of the claim index that stops after the batch. Planned for an empty
// table, Claim otherwise read every unfinished row through the key index,
// probed each row's key, and sorted them all: a minute a claim on a 200k
// backlog, and the relay stopped relaying (the soak of 2026-11-29).
func TestClaimWalksTheIndexAfterAnAnalyzeOfAnEmptyQueue(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	insertBacklog(t, db, 20000)
	for _, q := range []string{"DELETE FROM transaction_outbox", "ANALYZE transaction_outbox"} {
		_, err := db.Pool.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	insertBacklog(t, db, 20000)
	var tuples float64
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE relname = 'transaction_outbox'").Scan(&tuples))
	require.Zero(t, tuples, "the statistics say the queue is empty")

	pool := storePool(t, db)
	now := time.Now()
	forEachPlanMode(t, pool, now, func(mode, plan string) { requireBatchWalk(t, mode, plan) })

	claimsTheFirstBatch(t, pool, now)
}

// While the relay keeps up, the queue holds a few rows when it is analyzed,
// and the claim planned for so small a table updates its batch by reading
// the table through (a sequential scan matched against the picked ids):
// the plan the one-hour soak of 2026-11-29 saw twice. A prepared claim keeps
// that plan when a burst then arrives, until the next analyze, and reads
// the whole backlog for every batch. The batch's rows are looked up by id
// in the primary key, whatever the table's size.
func TestClaimLooksItsBatchUpByIdOnASmallQueue(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	insertBacklog(t, db, 50)
	_, err := db.Pool.Exec(ctx, "ANALYZE transaction_outbox")
	require.NoError(t, err)
	pool := storePool(t, db)
	forEachPlanMode(t, pool, time.Now(), func(mode, plan string) {
		require.NotContains(t, plan, "Seq Scan", "%s: the batch's rows are looked up by id:\n%s", mode, plan)
		requireKeyLookups(t, plan)
	})

	// And a burst after it is claimed a full batch at a time.
	insertBacklog(t, db, 20000)
	got, err := outbox.NewStore(pool).Claim(ctx, time.Now(), 2000, time.Minute, "relay-1")
	require.NoError(t, err)
	require.Len(t, got, 2000)
}

// The store's sessions commit asynchronously (Claim's commit is on every
// row's latency path), but a dead-lettering transaction commits
// synchronously: its letter is announced on Kafka after the commit.
func TestDeadLetteringCommitsSynchronouslyOnTheStoresAsyncSessions(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	pool := storePool(t, db)
	var setting string
	require.NoError(t, pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting))
	require.Equal(t, "off", setting, "the store's sessions")

	id := insert(t, db, msg("wallet-1", 0))[0]
	got, err := outbox.NewStore(pool).Claim(ctx, time.Now(), 10, time.Minute, "relay-1")
	require.NoError(t, err)
	require.Equal(t, []int64{id}, ids(got))
	err = database.InTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := outbox.MarkDeadLetter(ctx, tx, id, "relay-1", errors.New("rejected"), "permanent"); err != nil {
			return err
		}
		return tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting)
	})
	require.NoError(t, err)
	require.Equal(t, "on", setting, "the dead-lettering transaction")
	var status string
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT status FROM transaction_outbox WHERE id = $1", id).Scan(&status))
	require.Equal(t, "dlq", status)
	require.NoError(t, pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting))
	require.Equal(t, "off", setting, "for that transaction only")
}
