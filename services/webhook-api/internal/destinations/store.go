package destinations

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/services/webhook-api/internal/destinations/sqlcdb"
)

// Store reads and writes destinations.
type Store struct{ q *sqlcdb.Queries }

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{q: sqlcdb.New(pool)} }

// fromRow is the domain view of a stored row.
func fromRow(r sqlcdb.Destination) Destination {
	return Destination{
		ID: r.ID.String(), UserID: r.UserID, Provider: r.Provider, Destination: r.Destination, Type: r.Type,
		Status: r.Status, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, DisabledBy: r.DisabledBy, DisabledAt: r.DisabledAt,
	}
}

// Register records reg for userID on behalf of client, or returns the
// active registration it repeats (created false). reg must be normalized.
func (s *Store) Register(ctx context.Context, client, userID, kind string, reg Registration) (d Destination, created bool, err error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Destination{}, false, fmt.Errorf("new destination id: %w", err)
	}
	// Two statements, not a transaction: if the active row the insert
	// collided with is disabled in between, the lookup finds nothing and
	// the loop inserts again.
	for range 3 {
		row, err := s.q.Register(ctx, sqlcdb.RegisterParams{ID: id, UserID: userID, Provider: reg.Provider,
			Destination: reg.Destination, Type: kind, CreatedBy: client})
		if err == nil {
			return fromRow(row), true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Destination{}, false, fmt.Errorf("register destination: %w", err)
		}
		row, err = s.q.Active(ctx, sqlcdb.ActiveParams{UserID: userID, Provider: reg.Provider, Destination: reg.Destination})
		if err == nil {
			return fromRow(row), false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Destination{}, false, fmt.Errorf("load destination: %w", err)
		}
	}
	return Destination{}, false, errors.New("register destination: it was disabled and registered again concurrently; retry")
}

// List returns userID's destinations, newest first; status "" lists all.
func (s *Store) List(ctx context.Context, userID, status string) ([]Destination, error) {
	rows, err := s.q.List(ctx, sqlcdb.ListParams{UserID: userID, Status: status})
	if err != nil {
		return nil, fmt.Errorf("list destinations: %w", err)
	}
	out := make([]Destination, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// Disable disables destination id of userID on behalf of client. Disabling
// a disabled destination answers it unchanged (a retried request is safe).
func (s *Store) Disable(ctx context.Context, client, userID, id string) (Destination, error) {
	did, err := uuid.Parse(id)
	if err != nil {
		return Destination{}, ErrNotFound
	}
	row, err := s.q.Disable(ctx, sqlcdb.DisableParams{ID: did, UserID: userID, DisabledBy: client})
	if err == nil {
		return fromRow(row), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Destination{}, fmt.Errorf("disable destination: %w", err)
	}
	row, err = s.q.Get(ctx, sqlcdb.GetParams{ID: did, UserID: userID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Destination{}, ErrNotFound
	}
	if err != nil {
		return Destination{}, fmt.Errorf("load destination: %w", err)
	}
	return fromRow(row), nil
}

// Ref names the destination a payout goes to: UserID's active destination
// of Provider with the id ID, the value Value, or both (then they must
// agree). An empty ID or Value names any.
type Ref struct {
	UserID   string
	Provider string
	ID       string
	Value    string
}

// Resolve returns the id and value of the active destination ref names,
// within tx, and holds its row (FOR SHARE) until tx ends: a concurrent
// disable waits, and then no longer disables a destination a payout was
// accepted for in between. It answers ErrNotRegistered when there is none.
func Resolve(ctx context.Context, tx pgx.Tx, ref Ref) (destID uuid.UUID, destination string, err error) {
	var want *uuid.UUID
	if ref.ID != "" {
		u, err := uuid.Parse(ref.ID)
		if err != nil {
			return uuid.UUID{}, "", ErrNotRegistered
		}
		want = &u
	}
	row, err := sqlcdb.New(tx).Resolve(ctx, sqlcdb.ResolveParams{UserID: ref.UserID, Provider: ref.Provider, ID: want, Value: ref.Value})
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.UUID{}, "", ErrNotRegistered
	}
	if err != nil {
		return uuid.UUID{}, "", fmt.Errorf("resolve destination: %w", err)
	}
	return row.ID, row.Destination, nil
}
