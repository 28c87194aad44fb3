package handler

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
)

// returnTypes names the aegis.settlements event of each ledger posting a
// refund or dispute object can make.
var returnTypes = map[string]event.Type{
	ledger.KindRefund:         event.TypeRefundPosted,
	ledger.KindRefundReversal: event.TypeRefundReversed,
	ledger.KindDisputeHold:    event.TypeDisputeOpened,
	ledger.KindDisputeRelease: event.TypeDisputeWon,
	ledger.KindDisputeLoss:    event.TypeDisputeLost,
}

// publishReturn writes one settlement event per posting res made for
// object r, to the outbox in tx: published if and only if the posting
// commits. ApplyReturn posts each transition of an object once (a
// duplicate or stale event posts nothing), and the event id names the
// posting, so each transition is published exactly once.
func (h *Handler) publishReturn(ctx context.Context, tx pgx.Tx, e event.PSPEvent, r event.Return, res ledger.ReturnResult) error {
	corr := logging.CorrelationID(ctx)
	for _, kind := range res.Posted {
		typ, ok := returnTypes[kind]
		if !ok {
			return fmt.Errorf("ledger posting %q has no settlement event type", kind)
		}
		ev := event.NewReturnPosted(typ, e.Provider, kind, r.ID, res.Payment.UserID, res.Amount, res.Payment.Currency, h.now())
		ev.PaymentReference, ev.PSPEventID = e.Reference, e.EventID
		if kind == ledger.KindRefund || kind == ledger.KindDisputeHold {
			ev.Owed = res.Owed // the debit is the only posting that can fall short
		}
		body, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode %s event: %w", typ, err)
		}
		_, err = outbox.Insert(ctx, tx, outbox.Message{
			Topic: kafkax.TopicSettlements, EventType: string(typ), PartitionKey: res.Payment.UserID, Payload: body,
			CorrelationID: corr,
			Headers: map[string]string{
				kafkax.HeaderCorrelationID: corr,
				kafkax.HeaderEventType:     string(typ),
				kafkax.HeaderMessageID:     ev.EventID,
			},
		})
		if err != nil {
			return fmt.Errorf("publish %s of %s: %w", typ, r.ID, err)
		}
	}
	return nil
}
