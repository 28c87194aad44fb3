package payouts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/pkg/outbox"
)

const sqlInsert = `
INSERT INTO payouts (id, client_id, idempotency_key, request_hash, user_id, amount, currency, destination,
                     provider, correlation_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (client_id, idempotency_key) DO NOTHING
RETURNING id`

const sqlInsertTransition = `
INSERT INTO payout_transitions (payout_id, from_status, to_status, attempt) VALUES ($1, NULL, 'INITIALIZED', 0)`

const sqlByKey = `SELECT id, request_hash FROM payouts WHERE client_id = $1 AND idempotency_key = $2`

const sqlGet = `
SELECT id, status, user_id, amount, currency, destination, provider, attempts,
       coalesce(psp_reference, ''), coalesce(last_error, ''), coalesce(error_class, ''), created_at, updated_at
FROM payouts WHERE id = $1`

const sqlHistory = `
SELECT coalesce(from_status, ''), to_status, attempt, coalesce(error, ''), coalesce(error_class, ''), at
FROM payout_transitions WHERE payout_id = $1 ORDER BY id`

// Store reads and creates payouts.
type Store struct {
	pool   *pgxpool.Pool
	notify interface{ Notify() }
}

// NewStore returns a Store on pool that tells notify (an outbox.Notifier)
// after each committed payout request.
func NewStore(pool *pgxpool.Pool, notify interface{ Notify() }) *Store {
	return &Store{pool: pool, notify: notify}
}

// Create commits a new payout for (clientID, key) or returns the payout the
// key already made. created is false for a replayed request.
func (s *Store) Create(ctx context.Context, clientID, key string, req Request) (p Payout, created bool, err error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Payout{}, false, fmt.Errorf("new payout id: %w", err)
	}
	hash := req.Hash()
	corr := logging.CorrelationID(ctx)
	var existing string
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var got uuid.UUID
		err := tx.QueryRow(ctx, sqlInsert, id, clientID, key, hash, req.UserID, req.Amount, req.Currency,
			req.Destination, req.Provider, corr).Scan(&got)
		if errors.Is(err, pgx.ErrNoRows) {
			var prevHash string
			if err := tx.QueryRow(ctx, sqlByKey, clientID, key).Scan(&existing, &prevHash); err != nil {
				return fmt.Errorf("load payout for idempotency key: %w", err)
			}
			if prevHash != hash {
				return ErrKeyReused
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("insert payout: %w", err)
		}
		created = true
		if _, err := tx.Exec(ctx, sqlInsertTransition, id); err != nil {
			return fmt.Errorf("insert payout transition: %w", err)
		}
		cmd, err := json.Marshal(event.PayoutRequested{PayoutID: id.String(), UserID: req.UserID,
			Amount: req.Amount, Currency: req.Currency, Provider: req.Provider})
		if err != nil {
			return fmt.Errorf("encode payout command: %w", err)
		}
		_, err = outbox.Insert(ctx, tx, outbox.Message{
			Topic: kafkax.TopicTransactions, EventType: event.TypePayoutRequested, PartitionKey: req.UserID,
			Payload: cmd, CorrelationID: corr,
			Headers: map[string]string{
				kafkax.HeaderCorrelationID: corr,
				kafkax.HeaderEventType:     event.TypePayoutRequested,
				kafkax.HeaderMessageID:     "payout:" + id.String() + ":request",
			},
		})
		return err
	})
	if err != nil {
		return Payout{}, false, err
	}
	if created {
		s.notify.Notify()
	}
	if !created {
		id, err = uuid.Parse(existing)
		if err != nil {
			return Payout{}, false, fmt.Errorf("stored payout id %q: %w", existing, err)
		}
	}
	p, err = s.Get(ctx, id.String())
	return p, created, err
}

// Get returns a payout with its history.
func (s *Store) Get(ctx context.Context, id string) (Payout, error) {
	pid, err := uuid.Parse(id)
	if err != nil {
		return Payout{}, ErrNotFound
	}
	var p Payout
	var got uuid.UUID
	err = s.pool.QueryRow(ctx, sqlGet, pid).Scan(&got, &p.Status, &p.UserID, &p.Amount, &p.Currency,
		&p.Destination, &p.Provider, &p.Attempts, &p.PSPReference, &p.LastError, &p.ErrorClass, &p.CreatedAt, &p.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Payout{}, ErrNotFound
	}
	if err != nil {
		return Payout{}, fmt.Errorf("load payout: %w", err)
	}
	p.ID = got.String()
	rows, err := s.pool.Query(ctx, sqlHistory, pid)
	if err != nil {
		return Payout{}, fmt.Errorf("load payout history: %w", err)
	}
	p.History, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Transition, error) {
		var t Transition
		err := r.Scan(&t.From, &t.To, &t.Attempt, &t.Error, &t.ErrorClass, &t.At)
		return t, err
	})
	if err != nil {
		return Payout{}, fmt.Errorf("load payout history: %w", err)
	}
	return p, nil
}
