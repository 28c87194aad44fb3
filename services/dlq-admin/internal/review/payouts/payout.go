package payouts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/payouts/sqlcdb"
)

// what is the part of dlq-admin this package's errors are marked with.
const what = "the payouts read model"

// Reader reads payouts.
type Reader struct{ q *sqlcdb.Queries }

// New returns a Reader on pool.
func New(pool *pgxpool.Pool) *Reader { return &Reader{q: sqlcdb.New(pool)} }

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

// Get returns the payout with id (a UUID), or ErrPayoutNotFound.
func (r *Reader) Get(ctx context.Context, id string) (_ Payout, err error) {
	defer fault.Mark(&err, what)
	pid, err := uuid.Parse(id)
	if err != nil {
		return Payout{}, ErrPayoutNotFound
	}
	row, err := r.q.GetPayout(ctx, pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return Payout{}, ErrPayoutNotFound
	}
	if err != nil {
		return Payout{}, fmt.Errorf("get payout %s: %w", id, err)
	}
	p := Payout{ID: row.ID, UserID: row.UserID, Amount: row.Amount, Currency: row.Currency, Provider: row.Provider,
		Destination: row.Destination, DestinationID: orNil(row.DestinationID), Status: row.Status, Attempts: row.Attempts,
		PSPReference: row.PSPReference, PSPStatus: row.PspStatus, LastError: row.LastError, ErrorClass: row.ErrorClass,
		CorrelationID: row.CorrelationID, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt}
	ts, err := r.q.PayoutTransitions(ctx, sqlcdb.PayoutTransitionsParams{PayoutID: pid, MaxRows: maxPayoutRows})
	if err != nil {
		return Payout{}, fmt.Errorf("get payout %s: transitions: %w", id, err)
	}
	for _, t := range ts {
		p.Transitions = append(p.Transitions, PayoutTransition{From: t.FromStatus, To: t.ToStatus, Attempt: t.Attempt,
			Error: t.Error, ErrorClass: t.ErrorClass, At: t.At})
	}
	as, err := r.q.PayoutAttempts(ctx, sqlcdb.PayoutAttemptsParams{PayoutID: pid, MaxRows: maxPayoutRows})
	if err != nil {
		return Payout{}, fmt.Errorf("get payout %s: attempts: %w", id, err)
	}
	for _, a := range as {
		p.PSPAttempts = append(p.PSPAttempts, PayoutAttempt(a))
	}
	return p, nil
}

// orNil is nil for "", the queries' absent value.
func orNil[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}
