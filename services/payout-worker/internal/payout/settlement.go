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
func (pr *Processor) publishOutcome(ctx context.Context, tx pgx.Tx, p *Payout, typ event.Type, reason string) error {
	o := event.NewPayoutOutcome(typ, p.ID.String(), string(p.Status), p.UserID, p.Amount, p.Currency, p.Provider, pr.now())
	o.PSPReference, o.Error = p.PSPReference, reason
	body, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("encode payout outcome: %w", err)
	}
	pr.metrics.finished.WithLabelValues(p.Provider, string(p.Status)).Inc()
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
