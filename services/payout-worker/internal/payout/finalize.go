package payout

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/consume"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
)

// Finalize applies a PSP outcome event (payout.paid, payout.failed,
// transfer.success/failed/reversed) to its payout. An event older than the
// latest one applied to the payout is stale and changes nothing.
func (pr *Processor) Finalize(ctx context.Context, m consume.Message, e event.PSPEvent) error {
	if e.Currency != "" {
		// Best effort: a posting whose accounts are not cached creates them
		// in its own transaction instead.
		if err := pr.ledger.Prepare(ctx, e.Provider, e.Currency); err != nil {
			return err
		}
	}
	return database.InTx(ctx, pr.pool, func(tx pgx.Tx) error {
		fresh, err := consume.Claim(ctx, tx, m)
		if err != nil || !fresh {
			return err
		}
		p, err := load(ctx, tx, e.PayoutID)
		if errors.Is(err, ErrUnknownPayout) {
			return pr.deadLetter(ctx, tx, m, fmt.Errorf("%s %s names %w", e.Provider, e.Type, err), errclass.Permanent, nil)
		}
		if err != nil {
			return err
		}
		if e.Stale || p.PSPUpdatedAt != nil && e.OccurredAt.Before(*p.PSPUpdatedAt) {
			pr.logger.InfoContext(ctx, "stale PSP event ignored", "payout_id", p.ID, "event_id", e.EventID,
				"event_at", e.OccurredAt, "latest_applied_at", *p.PSPUpdatedAt)
			return nil
		}
		at := e.OccurredAt
		p.PSPUpdatedAt = &at
		if e.ObjectStatus != "" {
			p.PSPStatus = e.ObjectStatus
		}
		if p.PSPReference == "" {
			p.PSPReference = e.Reference
		}
		lp := p.ledgerPayout()
		reason := fmt.Sprintf("%s %s", e.Provider, e.Type)
		if e.FailureCode != "" {
			reason += ": " + e.FailureCode
		}
		switch {
		case e.Action == event.ActionPayoutPaid && inFlight(p.Status):
			if err := pr.ledger.Settle(ctx, tx, lp); err != nil && !errors.Is(err, ledger.ErrAlreadyPosted) {
				return err
			}
			if _, err := move(ctx, tx, p, step{to: Succeeded, detail: map[string]any{"event_id": e.EventID}}); err != nil {
				return err
			}
			return pr.outcome(ctx, tx, p, "")

		case e.Action == event.ActionPayoutPaid && p.Status == Finalized:
			// We released the hold, yet the PSP paid: money left twice.
			msg := reason + " arrived for a payout whose hold was already released"
			if _, err := move(ctx, tx, p, step{to: NeedsReview, err: msg, class: string(errclass.Permanent)}); err != nil {
				return err
			}
			return pr.deadLetter(ctx, tx, m, errors.New(msg), errclass.Permanent, p)

		case (e.Action == event.ActionPayoutFailed || e.Action == event.ActionPayoutReversed) && inFlight(p.Status):
			if err := pr.ledger.Release(ctx, tx, lp); err != nil && !errors.Is(err, ledger.ErrAlreadyPosted) {
				return err
			}
			if _, err := move(ctx, tx, p, step{to: Failed, err: reason, class: string(errclass.Permanent)}, step{to: Finalized}); err != nil {
				return err
			}
			return pr.outcome(ctx, tx, p, reason)

		case (e.Action == event.ActionPayoutFailed || e.Action == event.ActionPayoutReversed) && p.Status == Succeeded:
			// Paid, then returned by the bank or reversed by the PSP.
			if err := pr.ledger.Return(ctx, tx, lp); err != nil && !errors.Is(err, ledger.ErrAlreadyPosted) {
				return err
			}
			if _, err := move(ctx, tx, p, step{to: Failed, err: reason + " after it was paid", class: string(errclass.Permanent)}, step{to: Finalized}); err != nil {
				return err
			}
			return pr.outcome(ctx, tx, p, reason)
		}
		// Already in the state the event reports (a duplicate under another
		// event id) or finished: record what the PSP said, change nothing.
		_, err = move(ctx, tx, p)
		return err
	})
}
