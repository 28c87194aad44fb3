package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/outbox/sqlcdb"
)

// ErrLeaseLost means the row is no longer claimed by this relay: its lease ran
// out and another relay took it over. The other relay will publish it; this
// one must not settle it.
var ErrLeaseLost = errors.New("outbox row lease lost")

// Row is a claimed outbox row.
type Row struct {
	ID            int64
	Topic         string
	EventType     string
	PartitionKey  string
	Payload       []byte
	Headers       map[string]string
	CorrelationID string
	RetryCount    int
	MaxRetries    int
	CreatedAt     time.Time
}

// Store is the relay's side of the outbox.
type Store struct {
	pool *pgxpool.Pool
	q    *sqlcdb.Queries
}

// StoreSettings are the session settings of the pool a Store runs on
// (database.Options.Settings). Every statement of the store is small and
// index-driven: Claim walks the index of unfinished rows in id order,
// probes each candidate's key in the key index and stops after the batch,
// which bounds its cost by the batch, not by the backlog; the rest look
// rows up by id. The queue's statistics cannot be trusted to lead the
// planner there. After a burst they lag behind the backlog (reltuples
// unknown or small); and published rows are deleted, so autovacuum often
// analyzes the table empty, and its statistics then say no row whatever the
// table's size until the next analyze. For so small a table the planner's
// cheapest plans read every unfinished row (a bitmap scan, or a scan of the
// key index) and sort them, probing each row's key, or hash the whole table
// to join the batch to it: 300 ms to a minute a claim on a 100k–200k
// backlog against milliseconds for the walk, and in the soak of 2026-11-29
// the relay relayed nothing for minutes. So the store's sessions turn off
// what those plans need and the walk does not: bitmap scans, sorts (a sort
// nothing can spare, the batch's own order, is still made: the settings
// price a plan out only where another exists), hash and merge joins, and
// sequential scans (planned for the few rows a queue that keeps up holds
// when it is analyzed, the claim read its batch by scanning the table, a
// plan a prepared statement keeps when a burst arrives); and
// Claim's key look-ups are written so that only the key index serves them
// without a sort (queries.sql). And JIT: the settings price the plans they
// turn off at 10^10, above jit_above_cost, and compiling took 750 ms of an
// 8 ms claim.
//
// The store's transactions commit with synchronous_commit off: Claim's
// commit is on the path of every relayed row (a relay publishes only after
// it), and waiting for its WAL flush added a flush (about 1 ms here, more
// when other sessions flush too) to each row's latency. What a server crash
// can undo — the last few hundred milliseconds of the relay's own
// bookkeeping, never a writer's row — only makes rows due again: an undone
// claim or DeletePublished republishes its rows (at-least-once: an undone
// delete brings the rows back as claimed, due again when their lease runs
// out; WAL is replayed in order, so a delete never survives without the
// claim before it and no row is deleted that was not published), an undone
// Retry or Release costs an attempt's count or the lease's wait. Dead-lettering is the
// exception: MarkDeadLetter makes its own transaction's commit synchronous,
// since its letter is announced on Kafka after the commit.
func StoreSettings() map[string]string {
	return map[string]string{
		"enable_bitmapscan": "off", "enable_sort": "off", "enable_hashjoin": "off", "enable_mergejoin": "off", "enable_seqscan": "off",
		"jit":                "off",
		"synchronous_commit": "off",
	}
}

// NewStore returns a Store on pool, which should be opened with
// StoreSettings.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool, q: sqlcdb.New(pool)} }

// Claim marks up to limit due rows as processing by owner until now+lease and
// returns them in id order: the heads of many keys and, in the room they
// leave, runs of consecutive rows behind them. See queries.sql (Claim) for the
// ordering rule. Rows of one key are handed out in id order and only as a prefix of
// the key's unfinished rows, so publishing a batch in order keeps each key's
// order. It looks for heads from the front of the backlog (a Cursor of its
// own); a claimer that claims again and again uses ClaimFrom.
func (s *Store) Claim(ctx context.Context, now time.Time, limit int, lease time.Duration, owner string) ([]Row, error) {
	var c Cursor
	return s.ClaimFrom(ctx, &c, now, limit, lease, owner)
}

// A Cursor is one claimer's place in the backlog: its next claim looks for
// heads among the ClaimWindow unfinished rows after it. The zero value is
// the front. A claim that took a full batch leaves it where it is (there may
// be more in that window); one that took less from a full window moves it
// past the window, so rows behind a window of blocked keys (a failing
// head's backlog, keys another claimer holds) are reached the next time;
// one whose window reached the backlog's end sets it back to the front.
// Each claim thus reads at most a window, and every row is looked at
// within backlog / ClaimWindow claims.
type Cursor struct {
	after int64
}

// ClaimWindow is how many unfinished rows a claim of limit looks for heads
// in: four batches, so that one claim finds a batch of heads among keys
// with a few rows each, and at least 1,000.
func ClaimWindow(limit int) int { return max(4*limit, 1000) }

// ClaimFrom is Claim from c's place in the backlog, and moves c on.
func (s *Store) ClaimFrom(ctx context.Context, c *Cursor, now time.Time, limit int, lease time.Duration, owner string) ([]Row, error) {
	scan := ClaimWindow(limit)
	res, err := s.q.Claim(ctx, sqlcdb.ClaimParams{Owner: owner, LockedUntil: now.Add(lease), Now: now, Batch: limit,
		After: c.after, Scan: scan})
	if err != nil {
		return nil, fmt.Errorf("claim outbox batch: %w", err)
	}
	// One row of NULLs when nothing was claimed; the window's end and size
	// on every row.
	got := make([]sqlcdb.ClaimRow, 0, len(res))
	for _, r := range res {
		if r.ID != nil {
			got = append(got, r)
		}
	}
	if len(res) > 0 {
		switch w := res[0]; {
		case w.WindowRows < scan:
			c.after = 0
		case len(got) < limit:
			c.after = w.WindowEnd
		}
	}
	// UPDATE ... RETURNING does not promise the CTE's order.
	slices.SortFunc(got, func(a, b sqlcdb.ClaimRow) int { return cmp.Compare(*a.ID, *b.ID) })
	// A run is only safe as a prefix: if a follower changed between the
	// statement's snapshot and its update (an old owner settling it late) it
	// is missing, and the rows behind it must not go out before it. Hand
	// them straight back.
	out := make([]Row, 0, len(got))
	next := map[string]int64{}
	var cut []int64
	for _, r := range got {
		if *r.Pos != next[*r.PartitionKey] {
			next[*r.PartitionKey] = -1 // the run is broken: everything behind it goes back
			cut = append(cut, *r.ID)
			continue
		}
		next[*r.PartitionKey]++
		row := Row{ID: *r.ID, Topic: *r.Topic, EventType: *r.EventType, PartitionKey: *r.PartitionKey, Payload: r.Payload,
			CorrelationID: *r.CorrelationID, RetryCount: int(*r.RetryCount), MaxRetries: int(*r.MaxRetries), CreatedAt: *r.CreatedAt}
		if err := json.Unmarshal(r.Headers, &row.Headers); err != nil {
			return nil, fmt.Errorf("claim outbox batch: decode headers of outbox row %d: %w", *r.ID, err)
		}
		out = append(out, row)
	}
	if len(cut) > 0 {
		if err := s.Release(ctx, cut, owner, now); err != nil {
			return nil, fmt.Errorf("claim outbox batch: hand back a broken run: %w", err)
		}
	}
	return out, nil
}

// DeletePublished settles published rows in one statement, by deleting
// them, and returns how many were still owned by owner. A published row is
// not kept: what was published is on Kafka, and what a consumer made of it
// is in its own tables (processed_events, the ledger, outbound_messages);
// a row that failed for good is settled by MarkDeadLetter instead and kept
// with its dead letter. Per-key order needs nothing of a published row
// either: Claim waits only on a key's unfinished rows.
func (s *Store) DeletePublished(ctx context.Context, ids []int64, owner string) (int64, error) {
	n, err := s.q.DeletePublished(ctx, sqlcdb.DeletePublishedParams{IDs: ids, Owner: owner})
	if err != nil {
		return 0, fmt.Errorf("delete published outbox rows: %w", err)
	}
	return n, nil
}

// Retry records a failed publish attempt of class and schedules the next at
// next.
func (s *Store) Retry(ctx context.Context, id int64, owner string, cause error, class string, next time.Time) (retryCount int, err error) {
	retryCount, err = s.q.Retry(ctx, sqlcdb.RetryParams{Error: cause.Error(), NextRetryAt: next, Class: class, ID: id, Owner: owner})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrLeaseLost
	}
	if err != nil {
		return 0, fmt.Errorf("schedule outbox retry: %w", err)
	}
	return retryCount, nil
}

// Release hands rows back without spending an attempt (shutdown, breaker
// open), due again at next.
func (s *Store) Release(ctx context.Context, ids []int64, owner string, next time.Time) error {
	if err := s.q.Release(ctx, sqlcdb.ReleaseParams{NextRetryAt: next, IDs: ids, Owner: owner}); err != nil {
		return fmt.Errorf("release outbox rows: %w", err)
	}
	return nil
}

// DeadLettered is what MarkDeadLetter reports about a row it gave up on.
type DeadLettered struct {
	RetryCount int
	CreatedAt  time.Time
	// History is every failed attempt: [{"at","error","class"}, ...].
	History []byte
}

// MarkDeadLetter marks a row dlq within tx, the transaction that also writes
// its dead_letters row, recording the final failure of class.
//
// The transaction then commits synchronously whatever the session's setting
// (StoreSettings): the dead letter is announced on Kafka once it commits,
// and a crash must not undo a letter that was announced.
func MarkDeadLetter(ctx context.Context, tx pgx.Tx, id int64, owner string, cause error, class string) (DeadLettered, error) {
	q := sqlcdb.New(tx)
	if err := q.SynchronousCommit(ctx); err != nil {
		return DeadLettered{}, fmt.Errorf("mark outbox row dlq: make the commit synchronous: %w", err)
	}
	r, err := q.MarkDeadLetter(ctx, sqlcdb.MarkDeadLetterParams{Error: cause.Error(), Class: class, ID: id, Owner: owner})
	if errors.Is(err, pgx.ErrNoRows) {
		return DeadLettered{}, ErrLeaseLost
	}
	if err != nil {
		return DeadLettered{}, fmt.Errorf("mark outbox row dlq: %w", err)
	}
	return DeadLettered{RetryCount: r.RetryCount, CreatedAt: r.CreatedAt, History: r.RetryHistory}, nil
}

// PurgeProcessed deletes up to limit rows an earlier relay marked processed
// (it kept published rows for a retention; DeletePublished keeps none) and
// reports how many it deleted: what is left of them after an upgrade, or
// what an old replica settles during a rolling deploy.
func (s *Store) PurgeProcessed(ctx context.Context, limit int) (int64, error) {
	n, err := s.q.PurgeProcessed(ctx, limit)
	if err != nil {
		return 0, fmt.Errorf("purge processed outbox rows: %w", err)
	}
	return n, nil
}

// Pool is the store's pool, for callers that open their own transaction
// around MarkDeadLetter.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Stats is the outbox backlog.
type Stats struct {
	Unfinished int64
	OldestAge  time.Duration
}

// Stats reports how many rows are unpublished and the age of the oldest.
func (s *Store) Stats(ctx context.Context, now time.Time) (Stats, error) {
	r, err := s.q.Stats(ctx, now)
	if err != nil {
		return Stats{}, fmt.Errorf("outbox stats: %w", err)
	}
	return Stats{Unfinished: r.Unfinished, OldestAge: time.Duration(r.OldestAgeSeconds * float64(time.Second))}, nil
}
