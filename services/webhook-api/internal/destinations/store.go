package destinations

import (
	"context"
	"errors"
	"fmt"
	"time"

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
		DisabledReason: r.DisabledReason, ExternalAccount: r.ExternalAccount, Currency: r.Currency,
		PSPCheckedAt: r.PspCheckedAt, PSPCheck: r.PspRecord,
	}
}

// ErrRegisteredOtherwise: the connected account is registered for the user
// with another external account (409); one registration per account is
// active at a time, so that a payout naming the account is never ambiguous.
var ErrRegisteredOtherwise = errors.New("this destination is registered for this user with another external account")

// sameRoute reports whether d is reg's registration (same external account).
func sameRoute(d Destination, reg Registration) bool {
	var ext string
	if d.ExternalAccount != nil {
		ext = *d.ExternalAccount
	}
	return ext == reg.ExternalAccount
}

// Active returns userID's active registration of reg's destination, if
// any: ErrRegisteredOtherwise when it pays another external account.
func (s *Store) Active(ctx context.Context, userID string, reg Registration) (Destination, bool, error) {
	row, err := s.q.Active(ctx, sqlcdb.ActiveParams{UserID: userID, Provider: reg.Provider, Destination: reg.Destination})
	if errors.Is(err, pgx.ErrNoRows) {
		return Destination{}, false, nil
	}
	if err != nil {
		return Destination{}, false, fmt.Errorf("load destination: %w", err)
	}
	d := fromRow(row)
	if !sameRoute(d, reg) {
		return d, false, fmt.Errorf("%w (destination %s); disable it first", ErrRegisteredOtherwise, d.ID)
	}
	return d, true, nil
}

// Register records reg for userID on behalf of client, or returns the
// active registration it repeats (created false). reg must be normalized.
func (s *Store) Register(ctx context.Context, client, userID, kind string, reg Registration, found Found) (d Destination, created bool, err error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Destination{}, false, fmt.Errorf("new destination id: %w", err)
	}
	var checkedAt *time.Time
	if found.Record != nil {
		now := time.Now()
		checkedAt = &now
	}
	// Two statements, not a transaction: if the active row the insert
	// collided with is disabled in between, the lookup finds nothing and
	// the loop inserts again.
	for range 3 {
		row, err := s.q.Register(ctx, sqlcdb.RegisterParams{ID: id, UserID: userID, Provider: reg.Provider,
			Destination: reg.Destination, Type: kind, CreatedBy: client, ExternalAccount: nonEmpty(reg.ExternalAccount),
			Currency: nonEmpty(found.Currency), PspCheckedAt: checkedAt, PspRecord: found.Record})
		if err == nil {
			return fromRow(row), true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Destination{}, false, fmt.Errorf("register destination: %w", err)
		}
		if d, ok, err := s.Active(ctx, userID, reg); ok || err != nil {
			return d, false, err
		}
	}
	return Destination{}, false, errors.New("register destination: it was disabled and registered again concurrently; retry")
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
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

// Resolved is the destination a payout goes to.
type Resolved struct {
	ID          uuid.UUID
	Destination string
	// Currency is the one it receives; "" when any.
	Currency string
}

// Resolve returns the id and value of the active destination ref names,
// within tx, and holds its row (FOR SHARE) until tx ends: a concurrent
// disable waits, and then no longer disables a destination a payout was
// accepted for in between. It answers ErrNotRegistered when there is none.
func Resolve(ctx context.Context, tx pgx.Tx, ref Ref) (Resolved, error) {
	var want *uuid.UUID
	if ref.ID != "" {
		u, err := uuid.Parse(ref.ID)
		if err != nil {
			return Resolved{}, ErrNotRegistered
		}
		want = &u
	}
	row, err := sqlcdb.New(tx).Resolve(ctx, sqlcdb.ResolveParams{UserID: ref.UserID, Provider: ref.Provider, ID: want, Value: ref.Value})
	if errors.Is(err, pgx.ErrNoRows) {
		return Resolved{}, ErrNotRegistered
	}
	if err != nil {
		return Resolved{}, fmt.Errorf("resolve destination: %w", err)
	}
	r := Resolved{ID: row.ID, Destination: row.Destination}
	if row.Currency != nil {
		r.Currency = *row.Currency
	}
	return r, nil
}
