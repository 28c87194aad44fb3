package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrPayoutNotFound is returned when no payout has the requested id.
var ErrPayoutNotFound = errors.New("payout not found")

// Payout is what the console shows of the payout a dead letter is about:
// its state, how it got there, where the money goes and what the PSP was
// asked. Read-only: dlq-admin never changes a payout.
type Payout struct {
	ID            string
	UserID        string
	Amount        int64
	Currency      string
	Provider      string
	Destination   string
	DestinationID *string
	Status        string
	Attempts      int
	PSPReference  *string
	PSPStatus     *string
	LastError     *string
	ErrorClass    *string
	CorrelationID string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	Transitions   []PayoutTransition
	PSPAttempts   []PayoutAttempt
}

// PayoutTransition is one row of payout_transitions.
type PayoutTransition struct {
	From       *string
	To         string
	Attempt    int
	Error      *string
	ErrorClass *string
	At         time.Time
}

// PayoutAttempt is one call to the PSP (payout_attempts).
type PayoutAttempt struct {
	Attempt      int
	Kind         string
	Outcome      string
	PSPReference *string
	Error        *string
	At           time.Time
}

// maxPayoutRows bounds the history a payout answer carries; a payout has a
// handful of transitions and attempts, so this only guards the answer size.
const maxPayoutRows = 200

// Payout returns the payout with id (a UUID), or ErrPayoutNotFound.
func (s *Store) Payout(ctx context.Context, id string) (Payout, error) {
	var p Payout
	err := s.pool.QueryRow(ctx, `
		SELECT id::text, user_id, amount, currency, provider, destination, destination_id::text, status, attempts,
		       psp_reference, psp_status, last_error, error_class, correlation_id, created_at, updated_at
		FROM payouts WHERE id = $1::uuid`, id).Scan(
		&p.ID, &p.UserID, &p.Amount, &p.Currency, &p.Provider, &p.Destination, &p.DestinationID, &p.Status, &p.Attempts,
		&p.PSPReference, &p.PSPStatus, &p.LastError, &p.ErrorClass, &p.CorrelationID, &p.CreatedAt, &p.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Payout{}, ErrPayoutNotFound
	}
	if err != nil {
		return Payout{}, fmt.Errorf("get payout %s: %w", id, err)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT from_status, to_status, attempt, error, error_class, at
		FROM payout_transitions WHERE payout_id = $1::uuid ORDER BY id LIMIT $2`, id, maxPayoutRows)
	if err != nil {
		return Payout{}, fmt.Errorf("get payout %s: transitions: %w", id, err)
	}
	p.Transitions, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (PayoutTransition, error) {
		var t PayoutTransition
		return t, r.Scan(&t.From, &t.To, &t.Attempt, &t.Error, &t.ErrorClass, &t.At)
	})
	if err != nil {
		return Payout{}, fmt.Errorf("get payout %s: transitions: %w", id, err)
	}
	rows, err = s.pool.Query(ctx, `
		SELECT attempt, kind, outcome, psp_reference, error, at
		FROM payout_attempts WHERE payout_id = $1::uuid ORDER BY id LIMIT $2`, id, maxPayoutRows)
	if err != nil {
		return Payout{}, fmt.Errorf("get payout %s: attempts: %w", id, err)
	}
	p.PSPAttempts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (PayoutAttempt, error) {
		var a PayoutAttempt
		return a, r.Scan(&a.Attempt, &a.Kind, &a.Outcome, &a.PSPReference, &a.Error, &a.At)
	})
	if err != nil {
		return Payout{}, fmt.Errorf("get payout %s: attempts: %w", id, err)
	}
	return p, nil
}
