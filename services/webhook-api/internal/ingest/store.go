package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/pkg/outbox"
)

// sqlInsertEvent stores the event and, in the same statement, records its
// object's latest seen time in psp_objects: the upsert only applies when the
// event is at least as new as what was seen, so no row back means stale.
const sqlInsertEvent = `
WITH ev AS (
    INSERT INTO webhook_events
        (provider, event_id, event_type, object_id, user_id, amount, currency, occurred_at, payload, correlation_id)
    VALUES ($1, $2, $3, nullif($4, ''), nullif($5, ''), nullif($6, 0), nullif($7, ''), $8, $9, $10)
    ON CONFLICT (provider, event_id) DO NOTHING
    RETURNING id),
obj AS (
    INSERT INTO psp_objects (provider, object_id, status, event_type, event_id, occurred_at)
    SELECT $1, $4, nullif($11, ''), $3, $2, $8 FROM ev WHERE $4 <> ''
    ON CONFLICT (provider, object_id) DO UPDATE
    SET status = EXCLUDED.status, event_type = EXCLUDED.event_type, event_id = EXCLUDED.event_id,
        occurred_at = EXCLUDED.occurred_at, updated_at = now()
    WHERE psp_objects.occurred_at <= EXCLUDED.occurred_at
    RETURNING 1)
SELECT (SELECT id FROM ev), (SELECT count(*) FROM obj)`

const sqlPayoutOwner = `SELECT user_id FROM payouts WHERE id = $1`

// ErrUnstorable means Postgres refused the body itself (for example a \u0000
// in a JSON string, which jsonb cannot hold); retrying cannot help.
var ErrUnstorable = errors.New("event body cannot be stored")

// Outcome of Save.
type Outcome string

const (
	// Accepted: stored and queued for Kafka.
	Accepted Outcome = "accepted"
	// DeadLettered: stored, and in the dead-letter store with the reason.
	DeadLettered Outcome = "dead_lettered"
	// Duplicate: already stored earlier; nothing new was written.
	Duplicate Outcome = "duplicate"
	// Stale: stored and published for the record, but the PSP had already
	// reported something newer about the object; it changes no money.
	Stale Outcome = "stale"
)

// Store commits webhook events.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool, now func() time.Time) *Store { return &Store{pool: pool, now: now} }

// Save commits n and its outbox row (or its dead letter) in one transaction.
func (s *Store) Save(ctx context.Context, n Normalized, body []byte) (Outcome, error) {
	e := n.Event
	corr := logging.CorrelationID(ctx)
	outcome := Accepted
	err := database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var id *int64
		var fresh int
		err := tx.QueryRow(ctx, sqlInsertEvent, e.Provider, e.EventID, e.Type, e.Reference, e.UserID,
			e.Amount, e.Currency, e.OccurredAt, body, corr, e.ObjectStatus).Scan(&id, &fresh)
		if err != nil {
			return fmt.Errorf("insert webhook event: %w", err)
		}
		if id == nil {
			outcome = Duplicate
			return nil
		}
		if e.Reference != "" && fresh == 0 {
			e.Stale = true
			outcome = Stale
		}
		key, err := partitionKey(ctx, tx, e)
		if err != nil {
			return err
		}
		payload, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("encode envelope: %w", err)
		}
		headers := map[string]string{
			kafkax.HeaderCorrelationID: corr,
			kafkax.HeaderEventType:     e.Type,
			kafkax.HeaderMessageID:     e.MessageID(),
			"provider":                 e.Provider,
		}
		if n.Problem != "" {
			outcome = DeadLettered
			now := s.now()
			_, _, err := dlq.Insert(ctx, tx, dlq.Letter{
				Source: dlq.SourceIngest, OriginalTopic: kafkax.TopicWebhookPending, PartitionKey: key,
				EventType: e.Type, Payload: payload, Headers: headers, Error: n.Problem,
				ErrorClass: string(errclass.Permanent), FirstFailureAt: now, FailedAt: now, CorrelationID: corr,
				RetryHistory: []dlq.Attempt{{At: now, Error: n.Problem, Class: string(errclass.Permanent)}},
			})
			return err
		}
		_, err = outbox.Insert(ctx, tx, outbox.Message{
			Topic: kafkax.TopicWebhookPending, EventType: e.Type, PartitionKey: key,
			Payload: payload, Headers: headers, CorrelationID: corr,
		})
		return err
	})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "22P05" || pgErr.Code == "22P02" || pgErr.Code == "22021") {
			return "", fmt.Errorf("%w: %s", ErrUnstorable, pgErr.Message)
		}
		return "", fmt.Errorf("save %s event %s: %w", e.Provider, e.EventID, err)
	}
	return outcome, nil
}

// partitionKey is the wallet owner: from the event, or for a payout outcome
// from the payout it names, so all of a wallet's records share a partition.
func partitionKey(ctx context.Context, tx pgx.Tx, e event.PSPEvent) (string, error) {
	if e.UserID != "" {
		return e.UserID, nil
	}
	if e.PayoutID == "" {
		return e.Provider + ":" + e.Reference, nil
	}
	if _, err := uuid.Parse(e.PayoutID); err != nil {
		return "payout:" + e.PayoutID, nil
	}
	var owner string
	err := tx.QueryRow(ctx, sqlPayoutOwner, e.PayoutID).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "payout:" + e.PayoutID, nil
	}
	if err != nil {
		return "", fmt.Errorf("look up payout owner: %w", err)
	}
	return owner, nil
}
