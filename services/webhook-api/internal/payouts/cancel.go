package payouts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/payouts/sqlcdb"
)

// ClassCanceled is the error class of a payout its client canceled.
const ClassCanceled = "canceled"

// Cancel ends a payout that has not been taken up by the worker: it is
// INITIALIZED, so no money is held and the PSP was never called. It moves
// to FAILED → FINALIZED with class "canceled" and the client named, and
// its outcome (payout.canceled) goes to aegis.settlements, in one
// transaction under the payout's row lock — the lock the worker's first
// step takes, so either the cancel or the worker's hold wins, never both;
// the worker then ignores the payout's command as it does any for a
// finished payout. Canceling a payout canceled before answers it again;
// any other state is ErrNotCancelable.
func (s *Store) Cancel(ctx context.Context, clientID, id string) (Payout, error) {
	pid, err := uuid.Parse(id)
	if err != nil {
		return Payout{}, ErrNotFound
	}
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		q := sqlcdb.New(tx)
		row, err := q.LockForCancel(ctx, pid)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("lock payout: %w", err)
		}
		status, userID, amount, currency, provider, corr := row.Status, row.UserID, row.Amount, row.Currency, row.Provider, row.CorrelationID
		switch {
		case payoutstate.Status(status) == payoutstate.Finalized && row.ErrorClass == ClassCanceled:
			return nil // canceled before: the same answer
		case !payoutstate.Status(status).Cancelable():
			return fmt.Errorf("%w: it is %s", ErrNotCancelable, status)
		}
		reason := "canceled by client " + clientID
		if err := q.Cancel(ctx, sqlcdb.CancelParams{ID: pid, Reason: reason,
			FromStatus: string(payoutstate.Initialized), ToStatus: string(payoutstate.Finalized)}); err != nil {
			return fmt.Errorf("cancel payout: %w", err)
		}
		if err := q.CancelTransitions(ctx, sqlcdb.CancelTransitionsParams{PayoutID: pid, Reason: reason,
			FromStatus: string(payoutstate.Initialized), Failed: string(payoutstate.Failed),
			ToStatus: string(payoutstate.Finalized)}); err != nil {
			return fmt.Errorf("record payout cancel: %w", err)
		}
		o := event.NewPayoutOutcome(event.TypePayoutCanceled, pid.String(), string(payoutstate.Finalized), userID, amount, currency, provider, time.Now())
		o.Error = reason
		body, err := json.Marshal(o)
		if err != nil {
			return fmt.Errorf("encode payout outcome: %w", err)
		}
		_, err = outbox.Insert(ctx, tx, outbox.Message{
			Topic: kafkax.TopicSettlements, EventType: string(event.TypePayoutCanceled), PartitionKey: userID, Payload: body,
			CorrelationID: corr,
			Headers: map[string]string{
				kafkax.HeaderCorrelationID: corr,
				kafkax.HeaderEventType:     string(event.TypePayoutCanceled),
				kafkax.HeaderMessageID:     o.EventID,
			},
		})
		return err
	})
	if err != nil {
		return Payout{}, err
	}
	s.notify.Notify()
	return s.Get(ctx, pid.String())
}
