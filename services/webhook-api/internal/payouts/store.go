package payouts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/destinations"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/payouts/sqlcdb"
)

// Every statement is in queries.sql (sqlc, package sqlcdb). The payout's
// rows are written by payout-worker's functions create_payout and
// cancel_payout, in this store's transactions.

// Store reads and creates payouts.
type Store struct {
	pool   *pgxpool.Pool
	notify interface{ Notify() }
	limits Limits
	now    func() time.Time
}

// NewStore returns a Store on pool that tells notify (an outbox.Notifier)
// after each committed payout request and enforces limits.
func NewStore(pool *pgxpool.Pool, notify interface{ Notify() }, limits Limits) *Store {
	return &Store{pool: pool, notify: notify, limits: limits, now: time.Now}
}

// WithClock returns the store judging destinations' cooling-off by now.
func (s *Store) WithClock(now func() time.Time) *Store {
	c := *s
	c.now = now
	return &c
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
		dest, err := destinations.Resolve(ctx, tx, destinations.Ref{
			UserID: req.UserID, Provider: req.Provider, ID: req.DestinationID, Value: req.Destination})
		if err != nil {
			return err
		}
		if dest.Currency != "" && dest.Currency != req.Currency {
			return &CurrencyError{Currency: req.Currency, Receives: dest.Currency}
		}
		destID := dest.ID
		if err := s.checkLimits(ctx, tx, req); err != nil {
			return err
		}
		if err := s.checkCoolingOff(ctx, tx, destID, req); err != nil {
			return err
		}
		_, err = sqlcdb.New(tx).CreatePayout(ctx, sqlcdb.CreatePayoutParams{ID: id, ClientID: clientID, IdempotencyKey: key,
			RequestHash: hash, UserID: req.UserID, Amount: req.Amount, Currency: req.Currency, Destination: dest.Destination,
			Provider: req.Provider, CorrelationID: corr, DestinationID: destID})
		if errors.Is(err, pgx.ErrNoRows) {
			// A concurrent request with the key committed first.
			_, err = byKey(ctx, tx, clientID, key, hash, &existing)
			return err
		}
		if err != nil {
			return fmt.Errorf("create payout: %w", err)
		}
		created = true
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
	used, err := q.PaidOutDaily(ctx, sqlcdb.PaidOutDailyParams{UserID: req.UserID, Currency: req.Currency,
		Unpaid: payoutstate.Names(payoutstate.Status.Unpaid)})
	if err != nil {
		return fmt.Errorf("sum daily payouts: %w", err)
	}
	if used+req.Amount > max {
		return &LimitError{Limit: "daily", Currency: req.Currency, Max: max, Used: used}
	}
	return nil
}

// checkCoolingOff refuses req when its destination is still in its
// cooling-off period and req would take its payouts over the cap.
func (s *Store) checkCoolingOff(ctx context.Context, tx pgx.Tx, destID uuid.UUID, req Request) error {
	max, ok := s.limits.NewDestination[req.Currency]
	if !ok || s.limits.CoolingOff <= 0 {
		return nil
	}
	q := sqlcdb.New(tx)
	if err := q.LockNewDestination(ctx, destID.String()); err != nil {
		return fmt.Errorf("lock new destination: %w", err)
	}
	d, err := q.NewDestinationPaid(ctx, sqlcdb.NewDestinationPaidParams{Currency: req.Currency, DestinationID: destID,
		Unpaid: payoutstate.Names(payoutstate.Status.Unpaid)})
	if err != nil {
		return fmt.Errorf("sum payouts to destination %s: %w", destID, err)
	}
	until := d.CreatedAt.Add(s.limits.CoolingOff)
	if !s.now().Before(until) || d.Paid+req.Amount <= max {
		return nil
	}
	return &CoolingOffError{Currency: req.Currency, Max: max, Paid: d.Paid, Until: until}
}

// Get returns a payout with its history.
func (s *Store) Get(ctx context.Context, id string) (Payout, error) {
	pid, err := uuid.Parse(id)
	if err != nil {
		return Payout{}, ErrNotFound
	}
	q := sqlcdb.New(s.pool)
	row, err := q.GetPayout(ctx, pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return Payout{}, ErrNotFound
	}
	if err != nil {
		return Payout{}, fmt.Errorf("load payout: %w", err)
	}
	p := Payout{ID: row.ID.String(), Status: row.Status, UserID: row.UserID, Amount: row.Amount, Currency: row.Currency,
		Destination: row.Destination, DestinationID: row.DestinationID, Provider: row.Provider, Attempts: row.Attempts,
		PSPReference: row.PSPReference, LastError: row.LastError, ErrorClass: row.ErrorClass,
		CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, ExternalAccount: row.ExternalAccount, PSPTransfer: row.PspTransfer}
	history, err := q.History(ctx, pid)
	if err != nil {
		return Payout{}, fmt.Errorf("load payout history: %w", err)
	}
	p.History = make([]Transition, 0, len(history))
	for _, t := range history {
		p.History = append(p.History, Transition{From: t.FromStatus, To: t.ToStatus, Attempt: t.Attempt, Error: t.Error,
			ErrorClass: t.ErrorClass, At: t.At})
	}
	requests, err := q.PSPRequests(ctx, pid)
	if err != nil {
		return Payout{}, fmt.Errorf("load payout PSP requests: %w", err)
	}
	p.PSPRequests = make([]PSPRequest, 0, len(requests))
	for _, r := range requests {
		p.PSPRequests = append(p.PSPRequests, PSPRequest(r))
	}
	evidence, err := q.Evidence(ctx, pid)
	if err != nil {
		return Payout{}, fmt.Errorf("load payout evidence: %w", err)
	}
	p.Evidence = make([]Evidence, 0, len(evidence))
	for _, e := range evidence {
		p.Evidence = append(p.Evidence, Evidence{Provider: e.Provider, EventID: e.EventID, Type: e.EventType, Amount: e.Amount,
			Currency: e.Currency, PSPReference: e.PSPReference, Verdict: e.Verdict, Reason: e.Reason, At: e.At})
	}
	return p, nil
}
