package payout

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbox"
)

// outcomeType is the aegis.settlements event type of a payout that reached
// status. NEEDS_REVIEW is not a failure: the money is still held and the
// outcome unknown, so it is payout.needs_review, and the final
// payout.succeeded or payout.failed follows when the PSP's record settles
// it. (It was published as payout.failed, which told the platform money
// came back that had not.)
func outcomeType(status Status) event.Type {
	switch status {
	case Succeeded:
		return event.TypePayoutSucceeded
	case NeedsReview:
		return event.TypePayoutNeedsReview
	default:
		return event.TypePayoutFailed
	}
}

// publishOutcome writes the payout's settlement event (schema
// pkg/event/schema/settlements/v1/<typ>.json) to the outbox in tx: it is
// published exactly when the state change commits. Its event id is
// payout:<id>:<status>, so a redelivery or replay carries the same id.
// amount is the payout's, or for payout.reversed what this reversal gave
// back (the rest, after parts announced by payout.partially_reversed).
func (pr *Processor) publishOutcome(ctx context.Context, tx pgx.Tx, p *Payout, typ event.Type, amount int64, reason string) error {
	o := event.NewPayoutOutcome(typ, p.ID.String(), string(p.Status), p.UserID, amount, p.Currency, p.Provider, pr.now())
	o.PSPReference, o.Error = p.PSPReference, reason
	pr.metrics.finished.WithLabelValues(p.Provider, string(p.Status)).Inc()
	return pr.publish(ctx, tx, p, o)
}

// publish puts o on aegis.settlements through the outbox, in the caller's tx.
func (pr *Processor) publish(ctx context.Context, tx pgx.Tx, p *Payout, o event.PayoutOutcome) error {
	typ := o.Type
	body, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("encode payout outcome: %w", err)
	}
	_, err = outbox.Insert(ctx, tx, outbox.Message{
		Topic: kafkax.TopicSettlements, EventType: string(typ), PartitionKey: p.UserID, Payload: body,
		CorrelationID: p.CorrelationID,
		Headers: map[string]string{
			kafkax.HeaderCorrelationID: p.CorrelationID,
			kafkax.HeaderEventType:     string(typ),
			kafkax.HeaderMessageID:     o.EventID,
		},
	})
	return err
}

// publishPart publishes payout.partially_reversed: part of p came back,
// reversed in all so far, in the caller's tx.
func (pr *Processor) publishPart(ctx context.Context, tx pgx.Tx, p *Payout, part, reversed int64) error {
	o := event.NewPayoutPartReturn(p.ID.String(), p.UserID, part, reversed, p.Currency, p.Provider, pr.now())
	o.PSPReference = p.PSPReference
	return pr.publish(ctx, tx, p, o)
}
