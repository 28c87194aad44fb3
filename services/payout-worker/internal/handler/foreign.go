package handler

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox"
)

// ClassEvidenceMismatch is the dead-letter class of a credit, refund or
// dispute that is not about our own money in our key's mode
// (origin.Foreign). dlq-admin pages for it under its own key
// (alert.DeadLetterKey(topic, "evidence_mismatch")), apart from the
// letters of events that were ours but could not be applied.
const ClassEvidenceMismatch errclass.Class = "evidence_mismatch"

// moneyEvent reports whether a moves a wallet's money by itself: a credit,
// refund or dispute. Payout outcomes pass the same check in
// payout.Processor.Finalize, where the refusal is also recorded on the
// payout they name.
func moneyEvent(a event.Action) bool {
	return a == event.ActionCredit || a == event.ActionRefund || a == event.ActionDispute
}

// refuseForeign moves no money for a money event that is not ours (why
// says how): the message is claimed and its dead letter staged in one
// transaction, so a redelivery neither applies it nor letters it twice.
// The letter is the record: it keeps the event as it came with the reason
// and class, next to webhook-api's stored webhook; dlq-admin stores and
// pages for it. A replay is judged again and refused again.
func (h *Handler) refuseForeign(ctx context.Context, m inbox.Message, e event.PSPEvent, why string) error {
	problem := fmt.Errorf("%s: %s %s %s moves no money: %s", ClassEvidenceMismatch, e.Provider, e.Type, e.EventID, why)
	staged := false
	err := inbox.InTx(ctx, h.pool, m, func(tx pgx.Tx) error {
		staged = true
		return h.letters.Stage(ctx, tx, m.Letter().WithFailure(dlq.Failure{Err: problem, Class: ClassEvidenceMismatch}, h.now()))
	})
	if err != nil {
		return err
	}
	if !staged {
		return nil
	}
	if e.Action == event.ActionCredit {
		h.creditCount.WithLabelValues(e.Provider, string(ClassEvidenceMismatch)).Inc()
	} else {
		h.returns.WithLabelValues(e.Provider, string(e.Action), string(ClassEvidenceMismatch)).Inc()
	}
	h.logger.WarnContext(ctx, "PSP money event is not about our money; not applied", "event_id", e.EventID,
		"provider", e.Provider, "type", e.Type, "action", string(e.Action), "mismatch", why)
	h.notify.Notify()
	return nil
}
