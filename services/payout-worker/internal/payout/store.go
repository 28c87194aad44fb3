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

	"github.com/aegis-payments/aegis/pkg/provider"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout/sqlcdb"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/psp"
)

// All SQL on payouts, payout_transitions, payout_attempts and
// payout_evidence is in queries.sql, compiled into sqlcdb.

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
	// SendingAt is when the create whose answer is not recorded yet was
	// sent (written before the call, cleared with its answer; always nil
	// outside SENDING_TO_GATEWAY).
	SendingAt *time.Time
	CreatedAt time.Time
	// ExternalAccount is the connected account's bank account or card a
	// Stripe payout goes to (a transfer, then the account's payout); "" for
	// a transfer alone or any other payout.
	ExternalAccount string
	// PSPTransfer is the transfer Stripe made for a payout to an external
	// account: once set, only the connected account's payout is sent.
	PSPTransfer string
}

// step is the payout_attempts step of the payout's next create: "" for a
// payout that is one object at its PSP.
func (p *Payout) step() string {
	switch {
	case p.ExternalAccount == "" || p.Provider != string(provider.Stripe):
		return ""
	case p.PSPTransfer == "":
		return stepTransfer
	}
	return stepConnectedPayout
}

// The two steps of a Stripe payout to a connected account's external
// account (payout_attempts.step).
const (
	stepTransfer        = "transfer"
	stepConnectedPayout = "connected_payout"
)

// connected reports whether the payout is paid out on a Stripe connected
// account: a transfer, then that account's payout.
func (p *Payout) connected() bool { return p.step() != "" }

// lookup is what the PSP is asked to find the payout's objects.
func (p *Payout) lookup() psp.Lookup {
	return psp.Lookup{PayoutID: p.ID.String(), Destination: p.Destination, ExternalAccount: p.ExternalAccount,
		Transfer: p.PSPTransfer, Since: p.CreatedAt}
}

func load(ctx context.Context, tx pgx.Tx, id string) (*Payout, error) {
	pid, err := uuid.Parse(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not a payout id", ErrUnknownPayout, id)
	}
	row, err := sqlcdb.New(tx).Load(ctx, pid)
	return loaded(id, fromRow(row), err)
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
	if err := inbox.QueueProcessed(ctx, b, m, &done); err != nil {
		return nil, false, err
	}
	if err := queueLoad(ctx, b, pid, func(row sqlcdb.LoadRow, err error) error {
		p, loadErr = fromRow(row), err
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // decided below, after done is known
		}
		return err
	}); err != nil {
		return nil, false, err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, false, fmt.Errorf("load payout %s: %w", id, err)
	}
	if done {
		return nil, true, nil
	}
	p, err = loaded(id, p, loadErr)
	return p, false, err
}

// loadAnswered is load for recording an attempt's answers (reqs): the
// load, the answers of the creates written before they were sent
// (queueAnswers) and m's claim need nothing of each other and go as one
// round trip. Every record that commits claims m, and one that does not
// commit claims nothing. It returns the payout and the requests still to
// be recorded (recordRequests).
func loadAnswered(ctx context.Context, tx pgx.Tx, m inbox.Message, id uuid.UUID, reqs []pspRequest) (*Payout, []pspRequest, error) {
	var p *Payout
	var loadErr error
	b := &pgx.Batch{}
	if err := queueLoad(ctx, b, id, func(row sqlcdb.LoadRow, err error) error {
		p, loadErr = fromRow(row), err
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // decided by loaded
		}
		return err
	}); err != nil {
		return nil, nil, err
	}
	rest, err := queueAnswers(ctx, b, id, reqs)
	if err != nil {
		return nil, nil, err
	}
	if err := inbox.QueueClaim(ctx, b, m); err != nil {
		return nil, nil, err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, fmt.Errorf("record payout %s attempt: %w", id, err)
	}
	p, err = loaded(id.String(), p, loadErr)
	return p, rest, err
}

func fromRow(r sqlcdb.LoadRow) *Payout {
	return &Payout{ID: r.ID, UserID: r.UserID, Amount: r.Amount, Currency: r.Currency, Destination: r.Destination,
		Provider: r.Provider, Status: Status(r.Status), Attempts: r.Attempts, PSPReference: r.PSPReference,
		PSPUpdatedAt: r.PspUpdatedAt, CorrelationID: r.CorrelationID, OutcomeUnknown: r.OutcomeUnknown,
		LookupNeeded: r.LookupNeeded, PSPKey: r.PspKey, FirstAttemptAt: r.FirstAttemptAt,
		LastUnknownAt: r.LastUnknownAt, SendingAt: r.SendingAt, CreatedAt: r.CreatedAt,
		ExternalAccount: r.ExternalAccount, PSPTransfer: r.PspTransfer}
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
	return moveWith(ctx, tx, &pgx.Batch{}, p, steps...)
}

// moveWith is move sending b's statements, queued by the caller, in the
// same round trip, before the move's own.
func moveWith(ctx context.Context, tx pgx.Tx, b *pgx.Batch, p *Payout, steps ...step) (int64, error) {
	var last int64
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
		fs := string(f)
		arg := sqlcdb.TransitionParams{PayoutID: p.ID, FromStatus: &fs, ToStatus: string(to), Attempt: p.Attempts,
			Error: s.err, ErrorClass: s.class, Detail: detail}
		if err := queueRow(b, func(q *sqlcdb.Queries) (int64, error) { return q.Transition(ctx, arg) }, func(id int64, err error) error {
			if err != nil {
				return fmt.Errorf("record transition %s → %s: %w", f, to, err)
			}
			last = id
			return nil
		}); err != nil {
			return 0, err
		}
		from = s.to
		if s.err != "" || s.class != "" {
			lastErr, lastClass = s.err, s.class
		}
	}
	// A create's send time only means something while the payout is being
	// sent: whatever moves it on (its answer, an outcome event, an
	// escalation) ends it. Leaving SENDING_TO_GATEWAY without the create's
	// answer (its recording clears SendingAt first) leaves that create's
	// outcome unknown: it may have executed.
	sendingAt := p.SendingAt
	if from != Sending && sendingAt != nil {
		p.OutcomeUnknown = true
		if p.LastUnknownAt == nil || sendingAt.After(*p.LastUnknownAt) {
			t := *sendingAt
			p.LastUnknownAt = &t
		}
		sendingAt = nil
	}
	update := sqlcdb.UpdateParams{ID: p.ID, Status: string(from), Attempts: p.Attempts,
		PSPReference: p.PSPReference, PspStatus: p.PSPStatus, PspUpdatedAt: p.PSPUpdatedAt, LastError: lastErr,
		ErrorClass: lastClass, OutcomeUnknown: p.OutcomeUnknown, LookupNeeded: p.LookupNeeded, PspKey: p.PSPKey,
		FirstAttemptAt: p.FirstAttemptAt, LastUnknownAt: p.LastUnknownAt, SendingAt: sendingAt, PspTransfer: p.PSPTransfer}
	if err := queueExec(b, func(q *sqlcdb.Queries) error { return q.Update(ctx, update) }, nil); err != nil {
		return 0, err
	}
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
	p.LastError, p.ErrorClass, p.SendingAt = lastErr, lastClass, sendingAt
	return last, nil
}

// attemptHistory is every recorded failure of the payout, for dead letters.
type attempt struct {
	At    time.Time
	Error string
	Class string
}

func history(ctx context.Context, tx pgx.Tx, id uuid.UUID) ([]attempt, error) {
	rows, err := sqlcdb.New(tx).Attempts(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("load payout attempts: %w", err)
	}
	h := make([]attempt, len(rows))
	for i, r := range rows {
		h[i] = attempt{At: r.At, Error: r.Error, Class: r.ErrorClass}
	}
	return h, nil
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
	// step is the create's step of a two-object payout (Payout.step).
	step string
	// row is the create's payout_attempts row written before it was sent
	// (outcome "sending"): its outcome is set there; 0 inserts a row.
	row int64
}

func recordRequests(ctx context.Context, tx pgx.Tx, p *Payout, reqs []pspRequest) error {
	b := &pgx.Batch{}
	reqs, err := queueAnswers(ctx, b, p.ID, reqs)
	if err != nil {
		return err
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	q := sqlcdb.New(tx)
	for _, r := range reqs {
		if err := q.RecordAttempt(ctx, sqlcdb.RecordAttemptParams{PayoutID: p.ID, Attempt: p.Attempts, Kind: r.kind,
			IdempotencyKey: r.key, Outcome: r.outcome, PSPReference: r.ref, Error: r.err, At: r.at, Step: r.step}); err != nil {
			return fmt.Errorf("record payout %s %s: %w", p.ID, r.kind, err)
		}
	}
	return nil
}

// queueAnswers queues on b the answers of the creates among reqs whose
// "sending" row was written before they were sent (it needs nothing of the
// payout's row, so it can go with the statement that loads it) and returns
// the other requests, to be inserted in order.
func queueAnswers(ctx context.Context, b *pgx.Batch, id uuid.UUID, reqs []pspRequest) ([]pspRequest, error) {
	var rest []pspRequest
	for _, r := range reqs {
		if r.row == 0 {
			rest = append(rest, r)
			continue
		}
		arg := sqlcdb.FinishCreateParams{ID: r.row, Outcome: r.outcome, PSPReference: r.ref, Error: r.err}
		if err := queueExec(b, func(q *sqlcdb.Queries) error { return q.FinishCreate(ctx, arg) }, func(err error) error {
			if err != nil {
				return fmt.Errorf("record payout %s create's answer: %w", id, err)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return rest, nil
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
	amount := e.amount
	if err := sqlcdb.New(tx).RecordEvidence(ctx, sqlcdb.RecordEvidenceParams{PayoutID: p.ID, Provider: e.provider,
		EventID: e.eventID, EventType: e.eventType, Amount: &amount, Currency: e.currency, PSPReference: e.reference,
		Verdict: e.verdict, Reason: e.reason}); err != nil {
		return fmt.Errorf("record evidence for payout %s: %w", p.ID, err)
	}
	return nil
}
