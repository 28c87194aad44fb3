package deliver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/telemetry"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/deliver/sqlcdb"
)

// RunIntake consumes aegis.settlements until ctx is done, then returns nil
// once what it stored is committed.
func (d *Deliverer) RunIntake(ctx context.Context) error {
	d.logger.Info("outbound intake started", "group", d.cfg.Group)
	err := d.intake.Run(ctx)
	d.logger.Info("outbound intake stopped")
	if err != nil {
		return fmt.Errorf("outbound intake: %w", err)
	}
	return nil
}

// head is what the intake reads of an event (the schema has checked it).
type head struct {
	EventID    string    `json:"event_id"`
	Type       string    `json:"type"`
	UserID     string    `json:"user_id"`
	OccurredAt time.Time `json:"occurred_at"`
}

// take stores one record: a message and its deliveries for a new event, a
// dead letter (errclass.Permanent) for a body off the schema, nothing for
// a known event id. Its transaction commits before the offset may move.
func (d *Deliverer) take(ctx context.Context, r *kgo.Record) error {
	if err := d.schema.Validate(r.Value); err != nil {
		return errclass.AsPermanent(fmt.Errorf("not a settlements event, not delivered: %w", err))
	}
	var h head
	if err := json.Unmarshal(r.Value, &h); err != nil {
		return errclass.AsPermanent(fmt.Errorf("not a settlements event, not delivered: %w", err))
	}
	stored, err := d.store(ctx, r, h)
	if err != nil {
		return err
	}
	if stored {
		d.Wake()
	}
	return nil
}

// errKnown rolls back the transaction of an event another member stored
// in the meantime (its sequence number is not spent).
var errKnown = errors.New("outbound event already stored")

func (d *Deliverer) store(ctx context.Context, r *kgo.Record, h head) (bool, error) {
	var seq, n int64
	err := database.InTx(ctx, d.pool, func(tx pgx.Tx) error {
		q := d.q.WithTx(tx)
		if err := q.DurableCommit(ctx); err != nil {
			return fmt.Errorf("outbound intake: %w", err)
		}
		known, err := q.MessageExists(ctx, h.EventID)
		if err != nil {
			return fmt.Errorf("outbound intake: look up event %s: %w", h.EventID, err)
		}
		if known {
			return errKnown // a redelivery or a replay: already stored
		}
		if seq, err = q.NextSequence(ctx, h.UserID); err != nil {
			return fmt.Errorf("outbound intake: next sequence: %w", err)
		}
		body, err := withSequence(r.Value, seq)
		if err != nil {
			return errclass.AsPermanent(err)
		}
		var traceparent *string
		if tp := kafkax.Header(r, telemetry.HeaderTraceparent); tp != "" {
			traceparent = &tp
		}
		id, err := q.InsertMessage(ctx, sqlcdb.InsertMessageParams{EventID: h.EventID, EventType: h.Type, UserID: h.UserID,
			Sequence: seq, OccurredAt: h.OccurredAt, Body: body, Traceparent: traceparent})
		if errors.Is(err, pgx.ErrNoRows) {
			return errKnown // stored by another member in the meantime (a rebalance)
		}
		if err != nil {
			return fmt.Errorf("outbound intake: store event %s: %w", h.EventID, err)
		}
		if n, err = q.FanOut(ctx, sqlcdb.FanOutParams{MessageID: id, EventType: h.Type}); err != nil {
			return fmt.Errorf("outbound intake: fan out event %s: %w", h.EventID, err)
		}
		return nil
	})
	if errors.Is(err, errKnown) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("outbound intake: event %s: %w", h.EventID, err)
	}
	d.logger.DebugContext(ctx, "outbound event stored", "event_id", h.EventID, "type", h.Type, "sequence", seq, "deliveries", n)
	return true, nil
}

// withSequence returns the event with "sequence": seq added, the rest of
// its bytes as published. An event that already carries a sequence (none
// on the topic should) has it replaced.
func withSequence(event []byte, seq int64) ([]byte, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(event, &probe); err != nil {
		return nil, fmt.Errorf("add sequence: %w", err)
	}
	if _, has := probe["sequence"]; has {
		probe["sequence"] = json.RawMessage(strconv.FormatInt(seq, 10))
		out, err := json.Marshal(probe)
		if err != nil {
			return nil, fmt.Errorf("add sequence: %w", err)
		}
		return out, nil
	}
	trimmed := bytes.TrimRight(event, " \t\r\n")
	if len(trimmed) < 2 || trimmed[len(trimmed)-1] != '}' {
		return nil, errors.New("add sequence: the event is not a JSON object")
	}
	out := make([]byte, 0, len(trimmed)+32)
	out = append(out, trimmed[:len(trimmed)-1]...)
	if len(probe) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"sequence":`...)
	out = strconv.AppendInt(out, seq, 10)
	out = append(out, '}')
	if !json.Valid(out) {
		return nil, errors.New("add sequence: the result is not valid JSON")
	}
	return out, nil
}
