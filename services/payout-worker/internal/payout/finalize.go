package payout

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/provider"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/origin"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/psp"
)

// Finalize applies a PSP outcome event (payout.paid, payout.failed,
// transfer.success/failed/reversed) to its payout. An event older than the
// latest one applied to the payout is stale and changes nothing; events
// that did not match the payout do not count.
func (pr *Processor) Finalize(ctx context.Context, m inbox.Message, e event.PSPEvent) error {
	if e.Currency != "" {
		// Best effort: a posting whose accounts are not cached creates them
		// in its own transaction instead.
		if err := pr.ledger.Prepare(ctx, e.Provider, e.Currency); err != nil {
			return err
		}
	}
	return inbox.InTx(ctx, pr.pool, m, func(tx pgx.Tx) error {
		p, err := load(ctx, tx, e.PayoutID)
		if errors.Is(err, ErrUnknownPayout) {
			return pr.deadLetter(ctx, tx, m, fmt.Errorf("%s %s names %w", e.Provider, e.Type, err), errclass.Permanent, nil)
		}
		if err != nil {
			return err
		}
		ev := evidence{provider: e.Provider, eventID: e.EventID, eventType: e.Type, amount: e.Amount,
			currency: e.Currency, reference: e.Reference}
		if mismatch := pr.mismatch(p, e); mismatch != "" {
			// Evidence that does not match the payout changes nothing: it is
			// recorded on the payout, dead-lettered and alerted on.
			ev.verdict, ev.reason = verdictMismatch, mismatch
			if err := recordEvidence(ctx, tx, p, ev); err != nil {
				return err
			}
			pr.logger.WarnContext(ctx, "PSP outcome event does not match its payout; not applied", "payout_id", p.ID,
				"event_id", e.EventID, "provider", e.Provider, "type", e.Type, "mismatch", mismatch)
			// The letter is about the event, not the payout's attempts: no
			// payout history on it.
			return pr.deadLetter(ctx, tx, m, fmt.Errorf("%s: %s %s %s does not match payout %s: %s", ClassOutcomeMismatch,
				e.Provider, e.Type, e.EventID, p.ID, mismatch), ClassOutcomeMismatch, nil)
		}
		// Order is judged here, against the latest event applied to the
		// payout, never on the envelope's stale flag: webhook-api sees every
		// event, including ones refused above, so a flag set from them would
		// let a forged event dated ahead make every genuine one look stale.
		// A reversal is never stale: money only ever comes back after it
		// left (a reversed transfer is reversed for good, and Stripe's
		// amount_reversed only grows, each total given back once), whereas
		// its event's time is whole seconds and the record it would be
		// compared with (a transfer paid when created, a lookup) is ours,
		// to the nanosecond: a transfer reversed within the second it was
		// recorded paid would look older than its payment.
		if e.Action != event.ActionPayoutReversed && p.PSPUpdatedAt != nil && e.OccurredAt.Before(*p.PSPUpdatedAt) {
			pr.logger.InfoContext(ctx, "stale PSP event ignored", "payout_id", p.ID, "event_id", e.EventID,
				"event_at", e.OccurredAt)
			ev.verdict = verdictStale
			return recordEvidence(ctx, tx, p, ev)
		}
		// A NEEDS_REVIEW payout may be one the PSP paid after we had given
		// its hold back: no hold is left to settle.
		released := false
		if p.Status == NeedsReview {
			if released, err = ledger.Posted(ctx, tx, ledger.KindPayoutRelease, p.ID.String()); err != nil {
				return err
			}
		}
		// What the event does, decided below; recorded with it.
		ev.verdict = verdictApplied
		applied := func() error { return recordEvidence(ctx, tx, p, ev) }
		if at := e.OccurredAt; p.PSPUpdatedAt == nil || at.After(*p.PSPUpdatedAt) {
			p.PSPUpdatedAt = &at
		}
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
		case e.Action == event.ActionPayoutPaid && inFlight(p.Status) && !released:
			if err := applied(); err != nil {
				return err
			}
			return pr.paid(ctx, tx, p, map[string]any{"event_id": e.EventID})

		case e.Action == event.ActionPayoutPaid && p.Status == Finalized:
			if err := applied(); err != nil {
				return err
			}
			// We released the hold, yet the PSP paid: money left twice.
			msg := reason + " arrived for a payout whose hold was already released"
			if _, err := move(ctx, tx, p, step{to: NeedsReview, err: msg, class: string(errclass.Permanent)}); err != nil {
				return err
			}
			return pr.deadLetter(ctx, tx, m, errors.New(msg), errclass.Permanent, p)

		case e.Action == event.ActionPayoutReversed && partOf(e, p) &&
			((inFlight(p.Status) && !released) || p.Status == Succeeded):
			// Part of the transfer came back, so it was made: the payout
			// is paid, and that part returns to the wallet once.
			if inFlight(p.Status) {
				if err := pr.paid(ctx, tx, p, map[string]any{"event_id": e.EventID}); err != nil {
					return err
				}
			}
			part, err := pr.ledger.Return(ctx, tx, p.ledgerPayout(), e.Reversed)
			if err != nil {
				return err
			}
			if part == 0 {
				ev.verdict = verdictRecorded // this total was given back already
			}
			if err := recordEvidence(ctx, tx, p, ev); err != nil {
				return err
			}
			if _, err := move(ctx, tx, p); err != nil || part == 0 {
				return err
			}
			return pr.publishPart(ctx, tx, p, part, e.Reversed)

		case e.Action == event.ActionPayoutFailed && p.connected() && (inFlight(p.Status) || p.Status == Succeeded):
			// The connected account's payout failed or was canceled after
			// its transfer: the money is in that account's balance, not
			// ours. Nothing goes back to the wallet; a person is asked
			// once (a paid payout stays paid: the transfer reached the
			// account).
			if err := applied(); err != nil {
				return err
			}
			msg := connectedPayoutMessage(p, reason)
			if p.Status == NeedsReview {
				_, err := move(ctx, tx, p)
				return err
			}
			if p.Status == Succeeded {
				if _, err := move(ctx, tx, p); err != nil {
					return err
				}
				return pr.deadLetter(ctx, tx, m, errors.New(msg), errclass.Class(psp.AttentionConnectedPayout), nil)
			}
			return pr.sweptToReview(ctx, tx, p, msg, errclass.Class(psp.AttentionConnectedPayout))

		case (e.Action == event.ActionPayoutFailed || e.Action == event.ActionPayoutReversed) && inFlight(p.Status):
			if err := applied(); err != nil {
				return err
			}
			return pr.failedAtPSP(ctx, tx, p, reason, nil)

		case (e.Action == event.ActionPayoutFailed || e.Action == event.ActionPayoutReversed) && p.Status == Succeeded:
			if err := applied(); err != nil {
				return err
			}
			// Paid, then returned by the bank or reversed by the PSP: the
			// rest of it (parts reversed before are back already).
			rest, err := pr.ledger.Return(ctx, tx, lp, lp.Amount)
			if err != nil {
				return err
			}
			if _, err := move(ctx, tx, p, step{to: Failed, err: reason + " after it was paid", class: string(errclass.Permanent)}, step{to: Finalized}); err != nil {
				return err
			}
			return pr.publishOutcome(ctx, tx, p, event.TypePayoutReversed, rest, reason)
		}
		// Already in the state the event reports (a duplicate under another
		// event id) or finished: record what the PSP said, change nothing.
		ev.verdict = verdictRecorded
		if err := recordEvidence(ctx, tx, p, ev); err != nil {
			return err
		}
		_, err = move(ctx, tx, p)
		return err
	})
}

// partOf reports whether e reverses only part of p (a partial reversal of
// its Stripe transfer); 0 reversed means all of it.
func partOf(e event.PSPEvent, p *Payout) bool { return e.Reversed > 0 && e.Reversed < p.Amount }

// paid settles an in-flight payout the PSP says it paid (an outcome event
// or the sweeper's lookup): the hold goes to the PSP clearing account, the
// payout is SUCCEEDED and its outcome published, in the caller's tx.
func (pr *Processor) paid(ctx context.Context, tx pgx.Tx, p *Payout, detail map[string]any) error {
	if err := pr.ledger.Settle(ctx, tx, p.ledgerPayout()); err != nil && !errors.Is(err, ledger.ErrAlreadyPosted) {
		return err
	}
	if _, err := move(ctx, tx, p, step{to: Succeeded, detail: detail}); err != nil {
		return err
	}
	return pr.outcome(ctx, tx, p, "")
}

// failedAtPSP ends an in-flight payout the PSP says did not pay (failed,
// canceled, reversed): the hold is released once, FAILED → FINALIZED, the
// outcome published, in the caller's tx.
func (pr *Processor) failedAtPSP(ctx context.Context, tx pgx.Tx, p *Payout, reason string, detail map[string]any) error {
	if err := pr.ledger.Release(ctx, tx, p.ledgerPayout()); err != nil && !errors.Is(err, ledger.ErrAlreadyPosted) {
		return err
	}
	if _, err := move(ctx, tx, p, step{to: Failed, err: reason, class: string(errclass.Permanent), detail: detail},
		step{to: Finalized}); err != nil {
		return err
	}
	return pr.outcome(ctx, tx, p, reason)
}

// ClassOutcomeMismatch is the dead-letter class of a PSP outcome event that
// does not match the payout it names.
const ClassOutcomeMismatch errclass.Class = "outcome_mismatch"

// Evidence verdicts (payout_evidence.verdict).
const (
	verdictApplied  = "applied"
	verdictMismatch = string(ClassOutcomeMismatch)
	verdictStale    = "stale"
	verdictRecorded = "recorded"
)

// mismatch says why a PSP outcome event is no evidence about p, or "".
// Provider, amount and currency must be the payout's, and the PSP's id once
// we know it; and the event must be about our own account's money in our
// key's mode (origin.Foreign: Stripe's Connect account and livemode), the
// check every money event passes.
func (pr *Processor) mismatch(p *Payout, e event.PSPEvent) string {
	var why []string
	if e.Provider != p.Provider {
		why = append(why, fmt.Sprintf("provider %q, payout's %q", e.Provider, p.Provider))
	}
	if e.Amount != p.Amount {
		why = append(why, fmt.Sprintf("amount %d, payout's %d", e.Amount, p.Amount))
	}
	if !strings.EqualFold(e.Currency, p.Currency) {
		why = append(why, fmt.Sprintf("currency %q, payout's %q", e.Currency, p.Currency))
	}
	// A payout paid out on a connected account is two objects: its
	// transfer's events (transfer.reversed) come from our account and name
	// the transfer; its payout's come from the connected account (account
	// set to it) and name that payout.
	transferEvent := e.Provider == string(provider.Stripe) && strings.HasPrefix(e.Type, "transfer.")
	ref, account := p.PSPReference, ""
	if p.connected() {
		if transferEvent {
			ref = p.PSPTransfer
		} else {
			account = p.Destination
		}
	}
	if ref != "" && e.Reference != ref {
		why = append(why, fmt.Sprintf("PSP reference %q, payout's %q", e.Reference, ref))
	}
	if foreign := origin.ForeignFor(&e, pr.cfg.StripeLivemode, account); foreign != "" {
		why = append(why, foreign)
	}
	if account != "" && e.Account != account {
		why = append(why, fmt.Sprintf("not sent for connected account %q, which pays the payout out", account))
	}
	return strings.Join(why, "; ")
}
