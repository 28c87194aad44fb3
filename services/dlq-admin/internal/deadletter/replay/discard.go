package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
)

// ErrHoldsMoney means a letter to discard is about a payout that still
// holds money: unfinished, its hold neither settled nor released. Nothing
// was discarded (409, code holds_money).
var ErrHoldsMoney = errors.New("dead letter's payout still holds money")

// HeldLetter is a letter whose payout still holds money.
type HeldLetter struct {
	LetterID int64
	PayoutID string
	Status   string
}

// HoldsMoneyError names the letters a discard refused and their payouts.
type HoldsMoneyError struct{ Letters []HeldLetter }

// maxNamed is how many letters a HoldsMoneyError's message names.
const maxNamed = 5

func (e *HoldsMoneyError) Error() string {
	var named []string
	for i, l := range e.Letters {
		if i == maxNamed {
			named = append(named, fmt.Sprintf("and %d more", len(e.Letters)-maxNamed))
			break
		}
		named = append(named, fmt.Sprintf("letter %d: payout %s is %s", l.LetterID, l.PayoutID, l.Status))
	}
	return fmt.Sprintf("refused: %s with its hold neither settled nor released (%s); "+
		"discarding would leave the money held with nobody asked: replay the letter, or resolve the payout "+
		"(POST /v1/payouts/{id}/resolve) first", plural(len(e.Letters)), strings.Join(named, "; "))
}

func plural(n int) string {
	if n == 1 {
		return "the dead letter's payout is unfinished"
	}
	return fmt.Sprintf("%d dead letters' payouts are unfinished", n)
}

// Is makes errors.Is(err, ErrHoldsMoney) true.
func (e *HoldsMoneyError) Is(target error) bool { return target == ErrHoldsMoney }

// refuseHeld answers a *HoldsMoneyError when any of the letters ids is
// about a payout that still holds money. A discard closes a letter for
// good: the payout command or PSP outcome it carried would never be
// applied, and the hold would stay with nothing watching it. Once the
// payout is resolved (settled or released), or before it held anything,
// its letters may be discarded. The payout is read without a lock: a
// refusal is never wrong for long (a settlement committing meanwhile only
// makes the operator ask again), and a hold posted just after a discard
// was allowed comes from a payout command still alive elsewhere, which
// this letter's discard does not strand.
func refuseHeld(ctx context.Context, q *sqlcdb.Queries, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	rows, err := q.LettersHoldingMoney(ctx, sqlcdb.LettersHoldingMoneyParams{IDs: ids,
		Closed: payoutstate.Names(payoutstate.Status.Closed)})
	if err != nil {
		return fmt.Errorf("look up the payouts of dead letters: %w", err)
	}
	if len(rows) == 0 {
		return nil
	}
	held := make([]HeldLetter, len(rows))
	for i, r := range rows {
		held[i] = HeldLetter{LetterID: r.DeadLetterID, PayoutID: r.PayoutID, Status: r.Status}
	}
	return &HoldsMoneyError{Letters: held}
}

// BulkDiscardRequest selects open letters to close without a replay: those
// matching Match (its status may only be open or empty) and, when IDs is
// set, among IDs; at most Max of them, oldest first.
type BulkDiscardRequest struct {
	Match  store.Match
	IDs    []int64
	Max    int
	Reason string
	DryRun bool
}

// Validate returns a *input.Invalid naming the first bad field. A
// reason is required unless it is a dry run.
func (r BulkDiscardRequest) Validate() error {
	if r.Match.Status != "" && r.Match.Status != store.StatusOpen {
		return &input.Invalid{Param: "status", Reason: "must be open or omitted: only open letters are discarded"}
	}
	if err := r.Match.Validate(); err != nil {
		return err
	}
	if len(r.IDs) > MaxBulk {
		return &input.Invalid{Param: "ids", Reason: fmt.Sprintf("must list at most %d letters", MaxBulk)}
	}
	for _, id := range r.IDs {
		if id < 1 {
			return &input.Invalid{Param: "ids", Reason: "must be positive letter ids"}
		}
	}
	if r.Max < 1 || r.Max > MaxBulk {
		return &input.Invalid{Param: "max", Reason: fmt.Sprintf("is required (unless ids are given): an integer between 1 and %d", MaxBulk)}
	}
	if r.DryRun {
		return input.CheckReason(r.Reason, "")
	}
	return input.CheckReason(r.Reason, "say why these letters are closed without a replay")
}

// withDefaults makes Max the number of ids when only ids are given.
func (r BulkDiscardRequest) withDefaults() BulkDiscardRequest {
	if r.Max == 0 && len(r.IDs) > 0 {
		r.Max = len(r.IDs)
	}
	r.Reason = strings.TrimSpace(r.Reason)
	return r
}

// BulkDiscarded is the answer of a bulk discard, or of its dry run.
type BulkDiscarded struct {
	DryRun bool
	// Matched counts the open letters the request selects (before Max).
	Matched int64
	// Discarded is how many were discarded (a dry run: would be,
	// min(Matched, Max)).
	Discarded int64
	// IDs are the letters discarded, oldest first; for a dry run the first
	// ones it would discard (at most PreviewIDs).
	IDs []int64
}

// BulkDiscard closes the open letters of req on behalf of actor, in one
// transaction: they are locked, marked discarded with the reason, and each
// gets its own audit_log row, plus one row for the bulk action. A letter
// resolved by someone else meanwhile is left as it is. A dry run changes
// nothing. The whole request is refused (*HoldsMoneyError) when a letter
// it would discard is about a payout that still holds money.
func (s *Service) BulkDiscard(ctx context.Context, actor string, req BulkDiscardRequest) (_ BulkDiscarded, err error) {
	defer fault.Mark(&err, what)
	req = req.withDefaults()
	if err := req.Validate(); err != nil {
		return BulkDiscarded{}, err
	}
	if req.DryRun {
		return s.previewDiscard(ctx, req)
	}
	out := BulkDiscarded{}
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		upto, err := store.MaxID(ctx, tx)
		if err != nil {
			return err
		}
		sel := store.Selection{Match: req.Match, Upto: upto, IDs: req.IDs}
		if out.Matched, err = store.CountOpen(ctx, tx, sel); err != nil {
			return err
		}
		ids, err := store.LockOpen(ctx, tx, sel, req.Max)
		if err != nil {
			return err
		}
		if err := refuseHeld(ctx, s.q.WithTx(tx), ids); err != nil {
			return err
		}
		now := s.now()
		if out.IDs, err = store.DiscardMany(ctx, tx, ids, store.Resolution{By: actor, At: now, Reason: req.Reason}); err != nil {
			return err
		}
		out.Discarded = int64(len(out.IDs))
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: store.ActionBulkDiscard, TargetType: store.TargetDeadLetters,
			TargetID: fmt.Sprintf("%d letters", len(out.IDs)), Reason: req.Reason, At: now,
			Detail: map[string]any{"filter": discardFilter(req), "max": req.Max, "matched": out.Matched, "discarded": len(out.IDs)}})
	})
	if err != nil {
		return BulkDiscarded{}, err
	}
	if out.IDs == nil {
		out.IDs = []int64{}
	}
	s.logger.InfoContext(ctx, "dead letters discarded in bulk", "actor", actor, "discarded", out.Discarded, "matched", out.Matched)
	return out, nil
}

func (s *Service) previewDiscard(ctx context.Context, req BulkDiscardRequest) (BulkDiscarded, error) {
	upto, err := store.MaxID(ctx, s.pool)
	if err != nil {
		return BulkDiscarded{}, err
	}
	sel := store.Selection{Match: req.Match, Upto: upto, IDs: req.IDs}
	n, err := s.store.CountOpen(ctx, sel)
	if err != nil {
		return BulkDiscarded{}, err
	}
	ids, err := s.store.OpenIDs(ctx, sel, min(req.Max, PreviewIDs))
	if err != nil {
		return BulkDiscarded{}, err
	}
	if err := refuseHeld(ctx, s.q, ids); err != nil {
		return BulkDiscarded{}, err
	}
	if ids == nil {
		ids = []int64{}
	}
	return BulkDiscarded{DryRun: true, Matched: n, Discarded: min(n, int64(req.Max)), IDs: ids}, nil
}

// discardFilter is the request's selection for the audit record.
func discardFilter(req BulkDiscardRequest) map[string]any {
	m := req.Match
	f := map[string]any{}
	for k, v := range map[string]string{"topic": m.Topic, "error_class": m.ErrorClass, "payout_id": m.PayoutID,
		"user": m.User, "correlation_id": m.CorrelationID, "event_type": m.EventType} {
		if v != "" {
			f[k] = v
		}
	}
	if !m.Since.IsZero() {
		f["since"] = m.Since.UTC()
	}
	if !m.Until.IsZero() {
		f["until"] = m.Until.UTC()
	}
	if len(req.IDs) > 0 {
		f["ids"] = req.IDs
	}
	return f
}
