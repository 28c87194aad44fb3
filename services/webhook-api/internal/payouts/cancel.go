package payouts

import (
	"context"
	"encoding/json"
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
// Cancelable (payoutstate), so no money is held and the PSP was never
// called. payout-worker's cancel_payout moves it to FAILED → FINALIZED
// with class "canceled" and the client named under the payout's row lock —
// the lock the worker's first step takes, so either the cancel or the
// worker's hold wins, never both; the worker then ignores the payout's
// command as it does any for a finished payout. Its outcome
// (payout.canceled) goes to aegis.settlements in the same transaction.
// Canceling a payout canceled before answers it again; any other state is
// ErrNotCancelable.
func (s *Store) Cancel(ctx context.Context, clientID, id string) (Payout, error) {
	pid, err := uuid.Parse(id)
	if err != nil {
		return Payout{}, ErrNotFound
	}
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		row, err := sqlcdb.New(tx).CancelPayout(ctx, sqlcdb.CancelPayoutParams{ID: pid, ClientID: clientID})
		if err != nil {
			return fmt.Errorf("cancel payout: %w", err)
		}
		if !row.PayoutExists {
			return ErrNotFound
		}
		if !row.Canceled {
			if payoutstate.Status(row.Status) == payoutstate.Finalized && row.ErrorClass == ClassCanceled {
				return nil // canceled before: the same answer
			}
			return fmt.Errorf("%w: it is %s", ErrNotCancelable, row.Status)
		}
		o := event.NewPayoutOutcome(event.TypePayoutCanceled, pid.String(), row.Status, row.UserID, row.Amount,
			row.Currency, row.Provider, time.Now())
		o.Error = row.LastError
		body, err := json.Marshal(o)
		if err != nil {
			return fmt.Errorf("encode payout outcome: %w", err)
		}
		_, err = outbox.Insert(ctx, tx, outbox.Message{
			Topic: kafkax.TopicSettlements, EventType: string(event.TypePayoutCanceled), PartitionKey: row.UserID,
			Payload: body, CorrelationID: row.CorrelationID,
			Headers: map[string]string{
				kafkax.HeaderCorrelationID: row.CorrelationID,
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
