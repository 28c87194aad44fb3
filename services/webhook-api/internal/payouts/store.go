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
	"github.com/aegis-payments/aegis/services/webhook-api/internal/destinations"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/payouts/sqlcdb"
)

// Creating a payout is in queries.sql (sqlc, package sqlcdb); Get's reads
// and Cancel's statements are not converted yet (pkg/database's doc).

const sqlGet = `
SELECT id, status, user_id, amount, currency, destination, coalesce(destination_id::text, ''), provider, attempts,
       coalesce(psp_reference, ''), coalesce(last_error, ''), coalesce(error_class, ''), created_at, updated_at
FROM payouts WHERE id = $1`

const sqlHistory = `
SELECT coalesce(from_status, ''), to_status, attempt, coalesce(error, ''), coalesce(error_class, ''), at
FROM payout_transitions WHERE payout_id = $1 ORDER BY id`

const sqlPSPRequests = `
SELECT attempt, kind, coalesce(idempotency_key, ''), outcome, coalesce(psp_reference, ''), coalesce(error, ''), at
FROM payout_attempts WHERE payout_id = $1 ORDER BY id`

const sqlEvidence = `
SELECT provider, event_id, event_type, coalesce(amount, 0), coalesce(currency, ''), coalesce(psp_reference, ''),
       verdict, coalesce(reason, ''), at
FROM payout_evidence WHERE payout_id = $1 ORDER BY id`

// Cancel (cancel.go): only a payout nobody has taken up yet, under its row
// lock (the worker's first step takes the same lock).
const sqlLockForCancel = `
SELECT status, user_id, amount, currency, provider, correlation_id, coalesce(error_class, '')
FROM payouts WHERE id = $1 FOR UPDATE`

const sqlCancel = `
UPDATE payouts SET status = 'FINALIZED', last_error = $2, error_class = 'canceled', updated_at = now()
WHERE id = $1 AND status = 'INITIALIZED'`

const sqlCancelTransitions = `
INSERT INTO payout_transitions (payout_id, from_status, to_status, attempt, error, error_class)
VALUES ($1, 'INITIALIZED', 'FAILED', 0, $2, 'canceled'), ($1, 'FAILED', 'FINALIZED', 0, NULL, NULL)`

// Store reads and creates payouts.
type Store struct {
	pool   *pgxpool.Pool
	notify interface{ Notify() }
	limits Limits
}

// NewStore returns a Store on pool that tells notify (an outbox.Notifier)
// after each committed payout request and enforces limits.
func NewStore(pool *pgxpool.Pool, notify interface{ Notify() }, limits Limits) *Store {
	return &Store{pool: pool, notify: notify, limits: limits}
}

// Create commits a new payout for (clientID, key) or returns the payout the
// key already made. created is false for a replayed request. A new payout
// must go to an active destination of its user (destinations.Resolve) and
// fit the limits; a replayed request answers its payout even if its
// destination was disabled or a limit lowered since.
func (s *Store) Create(ctx context.Context, clientID, key string, req Request) (p Payout, created bool, err error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Payout{}, false, fmt.Errorf("new payout id: %w", err)
	}
	hash := req.Hash()
	corr := logging.CorrelationID(ctx)
	var existing string
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		found, err := byKey(ctx, tx, clientID, key, hash, &existing)
		if found || err != nil {
			return err
		}
		destID, dest, err := destinations.Resolve(ctx, tx, destinations.Ref{
			UserID: req.UserID, Provider: req.Provider, ID: req.DestinationID, Value: req.Destination})
		if err != nil {
			return err
		}
		if err := s.checkLimits(ctx, tx, req); err != nil {
			return err
		}
		q := sqlcdb.New(tx)
		_, err = q.InsertPayout(ctx, sqlcdb.InsertPayoutParams{ID: id, ClientID: clientID, IdempotencyKey: key,
			RequestHash: hash, UserID: req.UserID, Amount: req.Amount, Currency: req.Currency, Destination: dest,
			Provider: req.Provider, CorrelationID: corr, DestinationID: &destID})
		if errors.Is(err, pgx.ErrNoRows) {
			// A concurrent request with the key committed first.
			_, err = byKey(ctx, tx, clientID, key, hash, &existing)
			return err
		}
		if err != nil {
			return fmt.Errorf("insert payout: %w", err)
		}
		created = true
		if err := q.InsertFirstTransition(ctx, id); err != nil {
			return fmt.Errorf("insert payout transition: %w", err)
		}
		cmd, err := json.Marshal(event.PayoutRequested{PayoutID: id.String(), UserID: req.UserID,
			Amount: req.Amount, Currency: req.Currency, Provider: req.Provider})
		if err != nil {
			return fmt.Errorf("encode payout command: %w", err)
		}
		_, err = outbox.Insert(ctx, tx, outbox.Message{
			Topic: kafkax.TopicTransactions, EventType: string(event.TypePayoutRequested), PartitionKey: req.UserID,
			Payload: cmd, CorrelationID: corr,
			Headers: map[string]string{
				kafkax.HeaderCorrelationID: corr,
				kafkax.HeaderEventType:     string(event.TypePayoutRequested),
				kafkax.HeaderMessageID:     event.PayoutRequestID(id.String()),
			},
		})
		return err
	})
	if database.RefusesData(err) {
		return Payout{}, false, fmt.Errorf("%w: postgres refused it (%s)", ErrRefused, database.Code(err))
	}
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

// byKey finds the payout (clientID, key) made: found with its id in
// existing, or ErrKeyReused when it was made by another request.
func byKey(ctx context.Context, tx pgx.Tx, clientID, key, hash string, existing *string) (found bool, err error) {
	row, err := sqlcdb.New(tx).ByKey(ctx, sqlcdb.ByKeyParams{ClientID: clientID, IdempotencyKey: key})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("load payout for idempotency key: %w", err)
	}
	*existing = row.ID.String()
	if row.RequestHash != hash {
		return true, ErrKeyReused
	}
	return true, nil
}

// checkLimits refuses req when it exceeds a configured limit.
func (s *Store) checkLimits(ctx context.Context, tx pgx.Tx, req Request) error {
	if max, ok := s.limits.PerPayout[req.Currency]; ok && req.Amount > max {
		return &LimitError{Limit: "per_payout", Currency: req.Currency, Max: max}
	}
	max, ok := s.limits.Daily[req.Currency]
	if !ok {
		return nil
	}
	q := sqlcdb.New(tx)
	if err := q.LockDaily(ctx, sqlcdb.LockDailyParams{UserID: req.UserID, Currency: req.Currency}); err != nil {
		return fmt.Errorf("lock daily limit: %w", err)
	}
	used, err := q.PaidOutDaily(ctx, sqlcdb.PaidOutDailyParams{UserID: req.UserID, Currency: req.Currency})
	if err != nil {
		return fmt.Errorf("sum daily payouts: %w", err)
	}
	if used+req.Amount > max {
		return &LimitError{Limit: "daily", Currency: req.Currency, Max: max, Used: used}
	}
	return nil
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
		&p.Destination, &p.DestinationID, &p.Provider, &p.Attempts, &p.PSPReference, &p.LastError, &p.ErrorClass, &p.CreatedAt, &p.UpdatedAt)
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
	rows, err = s.pool.Query(ctx, sqlPSPRequests, pid)
	if err != nil {
		return Payout{}, fmt.Errorf("load payout PSP requests: %w", err)
	}
	p.PSPRequests, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (PSPRequest, error) {
		var q PSPRequest
		err := r.Scan(&q.Attempt, &q.Kind, &q.IdempotencyKey, &q.Outcome, &q.PSPReference, &q.Error, &q.At)
		return q, err
	})
	if err != nil {
		return Payout{}, fmt.Errorf("load payout PSP requests: %w", err)
	}
	rows, err = s.pool.Query(ctx, sqlEvidence, pid)
	if err != nil {
		return Payout{}, fmt.Errorf("load payout evidence: %w", err)
	}
	p.Evidence, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Evidence, error) {
		var e Evidence
		err := r.Scan(&e.Provider, &e.EventID, &e.Type, &e.Amount, &e.Currency, &e.PSPReference, &e.Verdict, &e.Reason, &e.At)
		return e, err
	})
	if err != nil {
		return Payout{}, fmt.Errorf("load payout evidence: %w", err)
	}
	return p, nil
}
