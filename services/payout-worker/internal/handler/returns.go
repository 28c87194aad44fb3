package handler

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
)

// moneyBack applies a refund or dispute event: evidence about PSP objects
// that take money back from a payment we credited. Each object is brought
// to the event's outcome in one transaction with the message's claim. An
// event the ledger must not act on (a payment never credited, more than is
// left of it, a currency that does not match) moves no money: it is
// dead-lettered by the consumer with the reason and an alert (refuseMoneyBack).
// Each posting is published on aegis.settlements in the same transaction
// (publishReturn).
func (h *Handler) moneyBack(ctx context.Context, m inbox.Message, e event.PSPEvent) error {
	kind := ledger.ReturnRefund
	if e.Action == event.ActionDispute {
		kind = ledger.ReturnDispute
	}
	problem := moneyBackProblem(e)
	for _, r := range e.Returns {
		if problem != nil || !currencyRE.MatchString(r.Currency) {
			break
		}
		if err := h.ledger.PrepareReturns(ctx, e.Provider, r.Currency); err != nil {
			return err
		}
	}
	var results []ledger.ReturnResult
	if problem == nil {
		err := database.InTx(ctx, h.pool, func(tx pgx.Tx) error {
			results = results[:0]
			fresh, err := inbox.Claim(ctx, tx, m)
			if err != nil || !fresh {
				return err
			}
			for _, r := range e.Returns {
				res, err := h.ledger.ApplyReturn(ctx, tx, e.Provider, kind, e.Reference, e.MessageID(), r)
				if err != nil {
					return err
				}
				if err := h.publishReturn(ctx, tx, e, r, res); err != nil {
					return err
				}
				results = append(results, res)
			}
			return nil
		})
		switch {
		case errors.Is(err, ledger.ErrNotCredited), errors.Is(err, ledger.ErrExceedsRefundable),
			errors.Is(err, ledger.ErrReturnMismatch):
			problem = err
		case err != nil:
			return err
		}
	}
	if problem != nil {
		return h.refuseMoneyBack(ctx, m, e, problem)
	}
	for i, res := range results {
		r := e.Returns[i]
		h.returns.WithLabelValues(e.Provider, kind, resultOf(res)).Inc()
		if len(res.Posted) > 0 {
			h.logger.InfoContext(ctx, "money back posted", "provider", e.Provider, "kind", kind, "object_id", r.ID,
				"payment", res.Payment.Reference, "user_id", res.Payment.UserID, "state", res.State,
				"posted", strings.Join(res.Posted, ","), "owed", res.Owed)
		}
		if res.Owed > 0 {
			h.alerts.Raise(ctx, alert.Alert{Key: alert.ReceivableKey(res.Payment.UserID), Severity: alert.Error,
				Summary: fmt.Sprintf("user %s owes %d %s: %s %s took more than the wallet held; payouts are blocked until credits repay it",
					res.Payment.UserID, res.Owed, res.Payment.Currency, kind, r.ID),
				Details: map[string]any{"user_id": res.Payment.UserID, "owed": res.Owed, "currency": res.Payment.Currency,
					"provider": e.Provider, "object_id": r.ID, "payment": res.Payment.Reference, "event_id": e.EventID}})
		}
	}
	return nil
}

func resultOf(res ledger.ReturnResult) string {
	if len(res.Posted) == 0 {
		return "unchanged"
	}
	return "posted"
}

func moneyBackProblem(e event.PSPEvent) error {
	if e.Reference == "" {
		return errors.New("refund or dispute without a payment reference")
	}
	if len(e.Returns) == 0 {
		return errors.New("refund or dispute event lists no refund or dispute")
	}
	for _, r := range e.Returns {
		switch {
		case r.ID == "":
			return errors.New("refund or dispute without an id")
		case r.Amount <= 0:
			return fmt.Errorf("%s amount %d is not positive", r.ID, r.Amount)
		case !currencyRE.MatchString(r.Currency):
			return fmt.Errorf("%s currency %q is not an ISO 4217 code", r.ID, r.Currency)
		}
	}
	return nil
}

// refuseMoneyBack refuses the event as permanent without claiming it: the
// consumer dead-letters it (with its alert) and no money moves. Unclaimed,
// a replay is judged afresh: a refund that overtook its payment's credit,
// replayed once the credit is in, is applied then.
func (h *Handler) refuseMoneyBack(_ context.Context, _ inbox.Message, e event.PSPEvent, problem error) error {
	h.returns.WithLabelValues(e.Provider, string(e.Action), "refused").Inc()
	return errclass.AsPermanent(fmt.Errorf("%s %s moves no money: %w", e.Provider, e.Type, problem))
}
