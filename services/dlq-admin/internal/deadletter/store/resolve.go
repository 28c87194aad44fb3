package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
)

// Resolution is who resolves a letter, when and why.
type Resolution struct {
	By     string
	At     time.Time
	Reason string
}

// Audit actions and target types of dead letters and their replay jobs.
const (
	ActionReplay        = "replay"
	ActionDiscard       = "discard"
	ActionBulkReplay    = "bulk_replay"
	ActionBulkDiscard   = "bulk_discard"
	ActionReplayJobRun  = "replay_job_start"
	ActionReplayJobStop = "replay_job_cancel"

	TargetDeadLetter  = "dead_letter"
	TargetDeadLetters = "dead_letters"
	TargetReplayJob   = "replay_job"
)

// Lock returns letter id, whole, locked until tx ends; ErrNotFound if there
// is none.
func Lock(ctx context.Context, tx pgx.Tx, id int64) (DeadLetter, error) {
	var d DeadLetter
	dest := append(d.fields(), &d.Payload, &d.Headers, &d.RetryHistory)
	err := tx.QueryRow(ctx, sqlLock, id).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return DeadLetter{}, ErrNotFound
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("lock dead letter %d: %w", id, err)
	}
	return d, nil
}

// Replay outcomes (dead_letters.replay_outcome).
const (
	// OutcomeRepublished: an outbox row carries the letter back to its topic.
	OutcomeRepublished = "republished"
	// OutcomeNoop: nothing was published, because the payout or event the
	// letter is about was already final; the subject state says what it was.
	OutcomeNoop = "noop"
)

// Replay is what a replay did: its outcome, the outbox row that carries a
// republished letter (0 for a no-op) and, for a no-op, the state of the
// subject that made it one.
type Replay struct {
	Outcome      string
	OutboxID     int64
	SubjectState string
}

// MarkReplayed resolves open letter id as replayed with what the replay did
// and returns its new state. The caller holds the lock (Lock).
func MarkReplayed(ctx context.Context, tx pgx.Tx, id int64, r Resolution, rp Replay) (Summary, error) {
	var outboxID *int64
	if rp.OutboxID != 0 {
		outboxID = &rp.OutboxID
	}
	return resolve(ctx, tx, "mark dead letter replayed", sqlMarkReplayed, id, r.By, r.At, r.Reason, outboxID,
		rp.Outcome, rp.SubjectState)
}

// MarkDiscarded resolves open letter id as discarded and returns its new
// state. The caller holds the lock (Lock).
func MarkDiscarded(ctx context.Context, tx pgx.Tx, id int64, r Resolution) (Summary, error) {
	return resolve(ctx, tx, "mark dead letter discarded", sqlMarkDiscarded, id, r.By, r.At, r.Reason)
}

func resolve(ctx context.Context, tx pgx.Tx, what, sql string, args ...any) (Summary, error) {
	var sm Summary
	err := tx.QueryRow(ctx, sql, args...).Scan(sm.fields()...)
	if errors.Is(err, pgx.ErrNoRows) {
		// Only reachable without the lock: the letter is gone or resolved.
		return Summary{}, fmt.Errorf("%s %v: %w", what, args[0], ErrNotOpen)
	}
	if err != nil {
		return Summary{}, fmt.Errorf("%s %v: %w", what, args[0], err)
	}
	return sm, nil
}

// ErrNotOpen is returned by the Mark functions when the letter is no longer
// open.
var ErrNotOpen = errors.New("dead letter is not open")

// Selection is what bulk replay and bulk discard act on: the open letters
// with After < id <= Upto that match Match (its Status is ignored: only open
// letters are selected) and, when IDs is set, are among them.
type Selection struct {
	Match
	After int64
	Upto  int64
	IDs   []int64
}

// OpenIDs returns up to limit ids of open letters in sel, oldest first.
func (s *Store) OpenIDs(ctx context.Context, sel Selection, limit int) (_ []int64, err error) {
	defer fault.Mark(&err, what)
	sql, args := openIDsQuery(sel, limit)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("select open dead letters: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("select open dead letters: %w", err)
	}
	return ids, nil
}

// CountOpen counts the open letters in sel.
func (s *Store) CountOpen(ctx context.Context, sel Selection) (_ int64, err error) {
	defer fault.Mark(&err, what)
	return CountOpen(ctx, s.pool, sel)
}

// CountOpen counts the open letters in sel through q (a transaction or a
// pool).
func CountOpen(ctx context.Context, q sqlcdb.DBTX, sel Selection) (int64, error) {
	var n int64
	sql, args := openQuery("count(*)", sel)
	if err := q.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count open dead letters: %w", err)
	}
	return n, nil
}

// LockOpen locks up to limit open letters of sel within tx, oldest first,
// and returns their ids; they stay locked until tx ends.
func LockOpen(ctx context.Context, tx pgx.Tx, sel Selection, limit int) ([]int64, error) {
	sql, args := lockOpenQuery(sel, limit)
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("lock open dead letters: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("lock open dead letters: %w", err)
	}
	return ids, nil
}

// DiscardMany resolves the open letters ids (locked by the caller, LockOpen)
// as discarded, and writes one audit_log row per letter, within tx. It
// returns the ids it discarded.
func DiscardMany(ctx context.Context, tx pgx.Tx, ids []int64, r Resolution) ([]int64, error) {
	done, err := sqlcdb.New(tx).DiscardMany(ctx, sqlcdb.DiscardManyParams{IDs: ids, ResolvedBy: r.By, ResolvedAt: r.At,
		Reason: r.Reason, Action: ActionDiscard, TargetType: TargetDeadLetter})
	if err != nil {
		return nil, fmt.Errorf("discard dead letters: %w", err)
	}
	return done, nil
}

// MaxID is the highest letter id so far (0 when there is none).
func MaxID(ctx context.Context, q sqlcdb.DBTX) (int64, error) {
	id, err := sqlcdb.New(q).MaxID(ctx)
	if err != nil {
		return 0, fmt.Errorf("read highest dead letter id: %w", err)
	}
	return id, nil
}

// AlertPending claims up to limit letters nobody was alerted about, calls
// raise with them, and clears their flag, in one transaction. raise runs
// before the commit, so a crash may alert twice but never not at all; it
// must not block. Returns how many letters were claimed.
func (s *Store) AlertPending(ctx context.Context, limit int, raise func([]Summary)) (_ int, err error) {
	defer fault.Mark(&err, what)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("claim dead letters to alert: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, sqlPendingAlerts, limit)
	if err != nil {
		return 0, fmt.Errorf("claim dead letters to alert: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Summary, error) {
		var sm Summary
		err := row.Scan(sm.fields()...)
		return sm, err
	})
	if err != nil {
		return 0, fmt.Errorf("claim dead letters to alert: %w", err)
	}
	if len(items) == 0 {
		return 0, nil
	}
	ids := make([]int64, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	raise(items)
	if err := sqlcdb.New(tx).ClearAlerts(ctx, ids); err != nil {
		return 0, fmt.Errorf("clear dead-letter alert flags: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("clear dead-letter alert flags: %w", err)
	}
	return len(items), nil
}
