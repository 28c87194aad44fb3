package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/database"

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
	row, err := sqlcdb.New(tx).Lock(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return DeadLetter{}, ErrNotFound
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("lock dead letter %d: %w", id, err)
	}
	d, err := letter(sqlcdb.ListRow(row))
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
	row, err := sqlcdb.New(tx).MarkReplayed(ctx, sqlcdb.MarkReplayedParams{ID: id, ResolvedBy: r.By, ResolvedAt: r.At,
		Reason: r.Reason, ReplayOutboxID: outboxID, ReplayOutcome: rp.Outcome, ReplaySubjectState: rp.SubjectState})
	return resolved(id, "mark dead letter replayed", sqlcdb.ListRow(row), err)
}

// MarkDiscarded resolves open letter id as discarded and returns its new
// state. The caller holds the lock (Lock).
func MarkDiscarded(ctx context.Context, tx pgx.Tx, id int64, r Resolution) (Summary, error) {
	row, err := sqlcdb.New(tx).MarkDiscarded(ctx, sqlcdb.MarkDiscardedParams{ID: id, ResolvedBy: r.By, ResolvedAt: r.At,
		Reason: r.Reason})
	return resolved(id, "mark dead letter discarded", sqlcdb.ListRow(row), err)
}

// resolved is the letter a Mark statement returned (err its error).
func resolved(id int64, what string, row sqlcdb.ListRow, err error) (Summary, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		// Only reachable without the lock: the letter is gone or resolved.
		return Summary{}, fmt.Errorf("%s %d: %w", what, id, ErrNotOpen)
	}
	if err != nil {
		return Summary{}, fmt.Errorf("%s %d: %w", what, id, err)
	}
	d, err := letter(row)
	if err != nil {
		return Summary{}, fmt.Errorf("%s %d: %w", what, id, err)
	}
	return d.Summary, nil
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

// filters returns the conditions of sel besides its id range and status.
func (sel Selection) filters() *filters {
	m := sel.Match
	m.Status = ""
	f := m.filters()
	if len(sel.IDs) > 0 {
		f.add("id = ANY(@ids)", "ids", sel.IDs)
	}
	return f
}

// OpenIDs returns up to limit ids of open letters in sel, oldest first.
func (s *Store) OpenIDs(ctx context.Context, sel Selection, limit int) (_ []int64, err error) {
	defer fault.Mark(&err, what)
	ids, err := s.filtered.OpenIDs(sel.filters().in(ctx), sqlcdb.OpenIDsParams{After: sel.After, Upto: sel.Upto,
		MaxRows: limit})
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
	n, err := sqlcdb.New(database.NewTemplated(q)).CountOpen(sel.filters().in(ctx),
		sqlcdb.CountOpenParams{After: sel.After, Upto: sel.Upto})
	if err != nil {
		return 0, fmt.Errorf("count open dead letters: %w", err)
	}
	return n, nil
}

// LockOpen locks up to limit open letters of sel within tx, oldest first,
// and returns their ids; they stay locked until tx ends.
func LockOpen(ctx context.Context, tx pgx.Tx, sel Selection, limit int) ([]int64, error) {
	ids, err := sqlcdb.New(database.NewTemplated(tx)).LockOpen(sel.filters().in(ctx),
		sqlcdb.LockOpenParams{After: sel.After, Upto: sel.Upto, MaxRows: limit})
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
	rows, err := sqlcdb.New(tx).PendingAlerts(ctx, limit)
	if err != nil {
		return 0, fmt.Errorf("claim dead letters to alert: %w", err)
	}
	items, err := summaries(rows, func(r sqlcdb.PendingAlertsRow) sqlcdb.ListRow { return sqlcdb.ListRow(r) })
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
