package payout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox"
)

// All SQL on payouts and payout_transitions lives here.

const sqlLoad = `
SELECT id, user_id, amount, currency, destination, provider, status, attempts,
       coalesce(psp_reference, ''), psp_updated_at, correlation_id,
       outcome_unknown, lookup_needed, coalesce(psp_key, ''), first_attempt_at, last_unknown_at, created_at
FROM payouts WHERE id = $1
FOR UPDATE`

const sqlUpdate = `
UPDATE payouts
SET status = $2, attempts = $3, psp_reference = nullif($4, ''), psp_status = coalesce(nullif($5, ''), psp_status),
    psp_updated_at = $6, last_error = nullif($7, ''), error_class = nullif($8, ''), updated_at = now(),
    outcome_unknown = $9, lookup_needed = $10, psp_key = nullif($11, ''), first_attempt_at = $12,
    last_unknown_at = $13
WHERE id = $1`

const sqlTransition = `
INSERT INTO payout_transitions (payout_id, from_status, to_status, attempt, error, error_class, detail)
VALUES ($1, $2, $3, $4, nullif($5, ''), nullif($6, ''), $7)
RETURNING id`

const sqlAttempts = `
SELECT at, coalesce(error, ''), coalesce(error_class, '') FROM payout_transitions
WHERE payout_id = $1 AND error IS NOT NULL ORDER BY id`

const sqlAttempt = `
INSERT INTO payout_attempts (payout_id, attempt, kind, idempotency_key, outcome, psp_reference, error, at)
VALUES ($1, $2, $3, nullif($4, ''), $5, nullif($6, ''), nullif($7, ''), $8)`

const sqlEvidence = `
INSERT INTO payout_evidence (payout_id, provider, event_id, event_type, amount, currency, psp_reference, verdict, reason)
VALUES ($1, $2, $3, $4, $5, nullif($6, ''), nullif($7, ''), $8, nullif($9, ''))`

// The sweeper (sweep.go): one at a time across replicas; the payouts that
// have waited at the PSP since before $1 without a step or a lookup that
// got an answer, oldest first (payouts_status_idx).
const sqlSweepLock = `SELECT pg_try_advisory_lock(hashtext($1))`

const sqlSweepUnlock = `SELECT pg_advisory_unlock(hashtext($1))`

const sqlSweepCandidates = `
SELECT p.id FROM payouts p
WHERE p.status IN ('SENT_TO_GATEWAY', 'AWAITING_RESPONSE') AND p.updated_at < $1
  AND NOT EXISTS (SELECT 1 FROM payout_attempts a
                  WHERE a.payout_id = p.id AND a.kind = 'lookup' AND a.outcome <> 'unknown' AND a.at >= $1)
ORDER BY p.updated_at
LIMIT $2`

// ErrUnknownPayout means a message names a payout that does not exist.
var ErrUnknownPayout = errors.New("unknown payout")

// Payout is the row the state machine works on.
type Payout struct {
	ID            uuid.UUID
	UserID        string
	Amount        int64
	Currency      string
	Destination   string
	Provider      string
	Status        Status
	Attempts      int
	PSPReference  string
	PSPStatus     string
	PSPUpdatedAt  *time.Time
	CorrelationID string
	LastError     string
	ErrorClass    string
	// OutcomeUnknown: some attempt may have executed at the PSP. Sticky.
	OutcomeUnknown bool
	// LookupNeeded: the next attempt looks the object up before sending.
	LookupNeeded bool
	// PSPKey is the Idempotency-Key of the next create ("" = the first key).
	PSPKey         string
	FirstAttemptAt *time.Time
	// LastUnknownAt is when the latest create whose outcome is unknown was
	// sent: the settle window runs from it.
	LastUnknownAt *time.Time
	CreatedAt     time.Time
}

func load(ctx context.Context, tx pgx.Tx, id string) (*Payout, error) {
	pid, err := uuid.Parse(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not a payout id", ErrUnknownPayout, id)
	}
	p, err := scanPayout(tx.QueryRow(ctx, sqlLoad, pid))
	return loaded(id, p, err)
}

// loadUnprocessed is load for message m, unless m was processed already
// (done): the check and the load (which locks the row either way) go as
// one round trip.
func loadUnprocessed(ctx context.Context, tx pgx.Tx, m inbox.Message, id string) (p *Payout, done bool, err error) {
	pid, perr := uuid.Parse(id)
	if perr != nil {
		if done, err := inbox.Processed(ctx, tx, m); err != nil || done {
			return nil, done, err
		}
		return nil, false, fmt.Errorf("%w: %q is not a payout id", ErrUnknownPayout, id)
	}
	var loadErr error
	b := &pgx.Batch{}
	inbox.QueueProcessed(b, m, &done)
	b.Queue(sqlLoad, pid).QueryRow(func(r pgx.Row) error {
		p, loadErr = scanPayout(r)
		if errors.Is(loadErr, pgx.ErrNoRows) {
			return nil // decided below, after done is known
		}
		return loadErr
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, false, fmt.Errorf("load payout %s: %w", id, err)
	}
	if done {
		return nil, true, nil
	}
	p, err = loaded(id, p, loadErr)
	return p, false, err
}

func scanPayout(r pgx.Row) (*Payout, error) {
	p := &Payout{}
	err := r.Scan(&p.ID, &p.UserID, &p.Amount, &p.Currency, &p.Destination,
		&p.Provider, &p.Status, &p.Attempts, &p.PSPReference, &p.PSPUpdatedAt, &p.CorrelationID,
		&p.OutcomeUnknown, &p.LookupNeeded, &p.PSPKey, &p.FirstAttemptAt, &p.LastUnknownAt, &p.CreatedAt)
	return p, err
}

func loaded(id string, p *Payout, err error) (*Payout, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownPayout, id)
	}
	if err != nil {
		return nil, fmt.Errorf("load payout %s: %w", id, err)
	}
	return p, nil
}

// step is one transition with what it records.
type step struct {
	to     Status
	err    string
	class  string
	detail map[string]any
}

// move applies steps in order, checking each against the state machine, and
// writes the row once; it returns the id of the last transition row. The
// transition rows and the update go as one pipelined batch: one round trip
// however many steps (they need no result of each other).
func move(ctx context.Context, tx pgx.Tx, p *Payout, steps ...step) (int64, error) {
	var last int64
	b := &pgx.Batch{}
	from := p.Status
	lastErr, lastClass := p.LastError, p.ErrorClass
	for _, s := range steps {
		if err := checkTransition(from, s.to); err != nil {
			return 0, err
		}
		var detail []byte
		if s.detail != nil {
			var err error
			if detail, err = json.Marshal(s.detail); err != nil {
				return 0, fmt.Errorf("encode transition detail: %w", err)
			}
		}
		f, to := from, s.to
		b.Queue(sqlTransition, p.ID, f, to, p.Attempts, s.err, s.class, detail).QueryRow(func(r pgx.Row) error {
			if err := r.Scan(&last); err != nil {
				return fmt.Errorf("record transition %s → %s: %w", f, to, err)
			}
			return nil
		})
		from = s.to
		if s.err != "" || s.class != "" {
			lastErr, lastClass = s.err, s.class
		}
	}
	b.Queue(sqlUpdate, p.ID, from, p.Attempts, p.PSPReference, p.PSPStatus, p.PSPUpdatedAt,
		lastErr, lastClass, p.OutcomeUnknown, p.LookupNeeded, p.PSPKey, p.FirstAttemptAt, p.LastUnknownAt)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("move payout %s: %w", p.ID, err)
	}
	// The trace of the payout's handling shows each state it moved to
	// (written in tx: it holds if tx commits).
	span := trace.SpanFromContext(ctx)
	for _, s := range steps {
		span.AddEvent("payout "+string(s.to), trace.WithAttributes(
			attribute.String("aegis.payout_id", p.ID.String()), attribute.String("aegis.payout.from", string(p.Status))))
		p.Status = s.to
	}
	p.LastError, p.ErrorClass = lastErr, lastClass
	return last, nil
}

// attemptHistory is every recorded failure of the payout, for dead letters.
type attempt struct {
	At    time.Time
	Error string
	Class string
}

func history(ctx context.Context, tx pgx.Tx, id uuid.UUID) ([]attempt, error) {
	rows, err := tx.Query(ctx, sqlAttempts, id)
	if err != nil {
		return nil, fmt.Errorf("load payout attempts: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (attempt, error) {
		var a attempt
		err := r.Scan(&a.At, &a.Error, &a.Class)
		return a, err
	})
}

// pspRequest is one request made to the PSP for a payout, for
// payout_attempts.
type pspRequest struct {
	kind    string // create or lookup
	key     string
	outcome string // accepted, refused, not_executed, unknown, found, not_found
	ref     string
	err     string
	at      time.Time
}

func recordRequests(ctx context.Context, tx pgx.Tx, p *Payout, reqs []pspRequest) error {
	for _, r := range reqs {
		if _, err := tx.Exec(ctx, sqlAttempt, p.ID, p.Attempts, r.kind, r.key, r.outcome, r.ref, r.err, r.at); err != nil {
			return fmt.Errorf("record payout %s %s: %w", p.ID, r.kind, err)
		}
	}
	return nil
}

// evidence is what a PSP outcome event said about a payout and what became
// of it.
type evidence struct {
	provider, eventID, eventType string
	amount                       int64
	currency, reference          string
	verdict, reason              string
}

func recordEvidence(ctx context.Context, tx pgx.Tx, p *Payout, e evidence) error {
	if _, err := tx.Exec(ctx, sqlEvidence, p.ID, e.provider, e.eventID, e.eventType, e.amount, e.currency,
		e.reference, e.verdict, e.reason); err != nil {
		return fmt.Errorf("record evidence for payout %s: %w", p.ID, err)
	}
	return nil
}
