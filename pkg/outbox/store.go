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
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Claim marks up to limit due rows as processing by owner until now+lease and
// returns them in id order: the heads of many keys and, in the room they
// leave, runs of consecutive rows behind them. See sqlClaim for the ordering
// rule. Rows of one key are handed out in id order and only as a prefix of
// the key's unfinished rows, so publishing a batch in order keeps each key's
// order.
func (s *Store) Claim(ctx context.Context, now time.Time, limit int, lease time.Duration, owner string) ([]Row, error) {
	rows, err := s.pool.Query(ctx, sqlClaim, now, limit, owner, lease)
	if err != nil {
		return nil, fmt.Errorf("claim outbox batch: %w", err)
	}
	type claimed struct {
		Row
		pos int64
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
		var c claimed
		var headers []byte
		if err := r.Scan(&c.ID, &c.Topic, &c.EventType, &c.PartitionKey, &c.Payload, &headers,
			&c.CorrelationID, &c.RetryCount, &c.MaxRetries, &c.CreatedAt, &c.pos); err != nil {
			return c, err
		}
		if err := json.Unmarshal(headers, &c.Headers); err != nil {
			return c, fmt.Errorf("decode headers of outbox row %d: %w", c.ID, err)
		}
		return c, nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim outbox batch: %w", err)
	}
	// UPDATE ... RETURNING does not promise the CTE's order.
	slices.SortFunc(got, func(a, b claimed) int { return cmp.Compare(a.ID, b.ID) })
	// A run is only safe as a prefix: if a follower changed between the
	// statement's snapshot and its update (an old owner settling it late) it
	// is missing, and the rows behind it must not go out before it. Hand
	// them straight back.
	out := make([]Row, 0, len(got))
	next := map[string]int64{}
	var cut []int64
	for _, c := range got {
		if c.pos != next[c.PartitionKey] {
			next[c.PartitionKey] = -1 // the run is broken: everything behind it goes back
			cut = append(cut, c.ID)
			continue
		}
		next[c.PartitionKey]++
		out = append(out, c.Row)
	}
	if len(cut) > 0 {
		if err := s.Release(ctx, cut, owner, now); err != nil {
			return nil, fmt.Errorf("claim outbox batch: hand back a broken run: %w", err)
		}
	}
	return out, nil
}

// MarkProcessed settles published rows in one statement and returns how many
// were still owned by owner.
func (s *Store) MarkProcessed(ctx context.Context, ids []int64, owner string, now time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, sqlMarkProcessed, ids, now, owner)
	if err != nil {
		return 0, fmt.Errorf("mark outbox rows processed: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Retry records a failed publish attempt of class and schedules the next at
// next.
func (s *Store) Retry(ctx context.Context, id int64, owner string, cause error, class string, next time.Time) (retryCount int, err error) {
	err = s.pool.QueryRow(ctx, sqlRetry, id, cause.Error(), next, owner, class).Scan(&retryCount)
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
	if _, err := s.pool.Exec(ctx, sqlRelease, ids, next, owner); err != nil {
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
func MarkDeadLetter(ctx context.Context, tx pgx.Tx, id int64, owner string, cause error, class string) (DeadLettered, error) {
	var d DeadLettered
	err := tx.QueryRow(ctx, sqlMarkDLQ, id, cause.Error(), owner, class).Scan(&d.RetryCount, &d.CreatedAt, &d.History)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, ErrLeaseLost
	}
	if err != nil {
		return d, fmt.Errorf("mark outbox row dlq: %w", err)
	}
	return d, nil
}

// PurgeProcessed deletes up to limit rows processed before cutoff and
// reports how many it deleted (retention).
func (s *Store) PurgeProcessed(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	tag, err := s.pool.Exec(ctx, sqlPurgeProcessed, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("purge processed outbox rows: %w", err)
	}
	return tag.RowsAffected(), nil
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
	var st Stats
	var age float64
	if err := s.pool.QueryRow(ctx, sqlStats, now).Scan(&st.Unfinished, &age); err != nil {
		return st, fmt.Errorf("outbox stats: %w", err)
	}
	st.OldestAge = time.Duration(age * float64(time.Second))
	return st, nil
}
