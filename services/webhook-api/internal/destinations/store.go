package destinations

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const columns = `id, user_id, provider, destination, type, status, created_by, created_at, disabled_by, disabled_at`

// sqlRegister inserts a registration unless an active one exists; the
// second statement then finds it. ON CONFLICT names the partial index's
// columns and predicate.
const sqlRegister = `
INSERT INTO destinations (id, user_id, provider, destination, type, created_by)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (user_id, provider, destination) WHERE status = 'active' DO NOTHING
RETURNING ` + columns

const sqlActive = `
SELECT ` + columns + ` FROM destinations
WHERE user_id = $1 AND provider = $2 AND destination = $3 AND status = 'active'`

const sqlList = `
SELECT ` + columns + ` FROM destinations
WHERE user_id = $1 AND ($2 = '' OR status = $2)
ORDER BY created_at DESC, id DESC`

const sqlDisable = `
UPDATE destinations SET status = 'disabled', disabled_by = $3, disabled_at = now()
WHERE id = $1 AND user_id = $2 AND status = 'active'
RETURNING ` + columns

const sqlGet = `SELECT ` + columns + ` FROM destinations WHERE id = $1 AND user_id = $2`

// sqlResolve finds the active destination a payout names, by id, by value or
// both (then they must agree), and holds it (FOR SHARE) until the payout
// commits: a concurrent disable waits, and then no longer disables a
// destination a payout was accepted for in between.
const sqlResolve = `
SELECT id, destination FROM destinations
WHERE user_id = $1 AND provider = $2 AND status = 'active'
  AND ($3::uuid IS NULL OR id = $3) AND ($4 = '' OR destination = $4)
ORDER BY created_at DESC
LIMIT 1
FOR SHARE`

// Store reads and writes destinations.
type Store struct{ pool *pgxpool.Pool }

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

func scan(r pgx.Row) (Destination, error) {
	var d Destination
	var id uuid.UUID
	err := r.Scan(&id, &d.UserID, &d.Provider, &d.Destination, &d.Type, &d.Status, &d.CreatedBy, &d.CreatedAt,
		&d.DisabledBy, &d.DisabledAt)
	d.ID = id.String()
	return d, err
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
		d, err = scan(s.pool.QueryRow(ctx, sqlRegister, id, userID, reg.Provider, reg.Destination, kind, client))
		if err == nil {
			return d, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Destination{}, false, fmt.Errorf("register destination: %w", err)
		}
		d, err = scan(s.pool.QueryRow(ctx, sqlActive, userID, reg.Provider, reg.Destination))
		if err == nil {
			return d, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Destination{}, false, fmt.Errorf("load destination: %w", err)
		}
	}
	return Destination{}, false, errors.New("register destination: it was disabled and registered again concurrently; retry")
}

// List returns userID's destinations, newest first; status "" lists all.
func (s *Store) List(ctx context.Context, userID, status string) ([]Destination, error) {
	rows, err := s.pool.Query(ctx, sqlList, userID, status)
	if err != nil {
		return nil, fmt.Errorf("list destinations: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Destination, error) { return scan(r) })
	if err != nil {
		return nil, fmt.Errorf("list destinations: %w", err)
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
	d, err := scan(s.pool.QueryRow(ctx, sqlDisable, did, userID, client))
	if err == nil {
		return d, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Destination{}, fmt.Errorf("disable destination: %w", err)
	}
	d, err = scan(s.pool.QueryRow(ctx, sqlGet, did, userID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Destination{}, ErrNotFound
	}
	if err != nil {
		return Destination{}, fmt.Errorf("load destination: %w", err)
	}
	return d, nil
}

// Resolve returns the id and value of the active destination of userID and
// provider that id and/or value name, within tx (see sqlResolve). It
// answers ErrNotRegistered when there is none.
func Resolve(ctx context.Context, tx pgx.Tx, userID, provider, id, value string) (destID uuid.UUID, destination string, err error) {
	var want *uuid.UUID
	if id != "" {
		u, err := uuid.Parse(id)
		if err != nil {
			return uuid.UUID{}, "", ErrNotRegistered
		}
		want = &u
	}
	err = tx.QueryRow(ctx, sqlResolve, userID, provider, want, value).Scan(&destID, &destination)
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.UUID{}, "", ErrNotRegistered
	}
	if err != nil {
		return uuid.UUID{}, "", fmt.Errorf("resolve destination: %w", err)
	}
	return destID, destination, nil
}
