package erasure

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/erasure/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
)

// what is the part of dlq-admin this package's errors are marked with.
const what = "the erasure store"

// ApprovalKind is the approvals.kind of an erasure waiting for its second
// operator.
const ApprovalKind = "user_erasure"

// The audit actions of an erasure (target type TargetUser, target id the
// pseudonym).
const (
	ActionRequest = "erasure_request"
	ActionErase   = "erase"
	TargetUser    = "user"
)

// Erasure statuses.
const (
	StatusPending  = "pending"
	StatusErased   = "erased"
	StatusRejected = "rejected"
)

// MinKeyLength is the shortest ERASURE_KEY accepted, in bytes.
const MinKeyLength = 32

// maxUserID is destinations.user_id's bound, the longest user id any table
// accepts.
const maxUserID = 128

// Errors the API maps to statuses.
var (
	// ErrUnknownUser: no wallet, payout, destination, PSP event or
	// settlement message names the user (404).
	ErrUnknownUser = errors.New("no data of this user: unknown user id")
	// ErrPending: an erasure of this user already waits for approval (409).
	ErrPending = errors.New("an erasure of this user already waits for a second operator")
	// ErrNotConfigured: ERASURE_KEY is not set (503).
	ErrNotConfigured = errors.New("erasure is not configured: ERASURE_KEY is not set")
	// ErrNotFound: no erasure with this id (404).
	ErrNotFound = errors.New("erasure not found")
)

// RefusedError is an erasure refused because money would be stranded by it
// (409 erasure_refused); Reason says what to finish first.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// Erasure is one request to erase a user's personal data.
type Erasure struct {
	ID          int64
	Pseudonym   string
	Status      string
	Reason      string
	RequestedBy string
	ApprovalID  *int64
	ApprovedBy  *string
	// Counts is what erase_user_data changed, per table (once erased).
	Counts      json.RawMessage
	RequestedAt time.Time
	DecidedAt   *time.Time
}

// Service records erasure requests and, as the owner of their approvals,
// runs them.
type Service struct {
	pool   *pgxpool.Pool
	q      *sqlcdb.Queries
	gate   *approval.Gate
	key    []byte
	logger *slog.Logger
	now    func() time.Time
}

// New returns a Service; key is ERASURE_KEY (nil: every request is refused
// with ErrNotConfigured). Register s.Approvals() with gate for ApprovalKind.
func New(pool *pgxpool.Pool, gate *approval.Gate, key []byte, deps lifecycle.Deps) *Service {
	deps = deps.WithDefaults()
	return &Service{pool: pool, q: sqlcdb.New(pool), gate: gate, key: key,
		logger: deps.Logger.With("component", "erasure"), now: deps.Clock}
}

// Pseudonym is what replaces userID everywhere: "erased:" and the first 32
// hex digits of HMAC-SHA256(key, userID). The same user always gets the
// same pseudonym; without the key it cannot be linked to the user id.
func Pseudonym(key []byte, userID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("aegis-user-erasure\x00" + userID))
	return "erased:" + hex.EncodeToString(m.Sum(nil))[:32]
}

// Request records an erasure of userID asked for by actor and holds it for
// a second operator. The erasure is checked first (ErrUnknownUser, a
// RefusedError), so nobody approves what cannot run.
func (s *Service) Request(ctx context.Context, actor, userID, reason string) (_ Erasure, _ approval.Approval, err error) {
	defer fault.Mark(&err, what)
	if len(s.key) == 0 {
		return Erasure{}, approval.Approval{}, ErrNotConfigured
	}
	if err := input.Text("user_id", userID); err != nil {
		return Erasure{}, approval.Approval{}, err
	}
	if strings.TrimSpace(userID) == "" || len(userID) > maxUserID {
		return Erasure{}, approval.Approval{}, &input.Invalid{Param: "user_id", Reason: fmt.Sprintf("is required, at most %d bytes", maxUserID)}
	}
	reason = strings.TrimSpace(reason)
	if err := input.CheckReason(reason, "say why (a ticket or request reference), without the user's data"); err != nil {
		return Erasure{}, approval.Approval{}, err
	}
	if strings.Contains(reason, userID) {
		// The reason is kept with the erasure and in the audit log: it must
		// not be what links the pseudonym back to the user.
		return Erasure{}, approval.Approval{}, &input.Invalid{Param: "reason", Reason: "must not quote the user id (it is kept in the audit log)"}
	}
	var e Erasure
	var a approval.Approval
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		base := Pseudonym(s.key, userID)
		before, err := q.ErasedBefore(ctx, base)
		if err != nil {
			return fmt.Errorf("count earlier erasures: %w", err)
		}
		pseudonym := base
		if before > 0 {
			// The person was erased before and has new data: its rows get a
			// pseudonym of their own (a wallet's (kind, owner, currency)
			// would collide with the first erasure's), still recognisable
			// as this person's with the key.
			pseudonym = base + "." + strconv.FormatInt(before, 10)
		}
		counts, err := s.erase(ctx, q, userID, pseudonym, true)
		if err != nil {
			return err
		}
		now := s.now()
		id, err := q.InsertErasure(ctx, sqlcdb.InsertErasureParams{Pseudonym: pseudonym, UserID: &userID, Reason: reason,
			RequestedBy: actor, RequestedAt: now})
		if isUniqueViolation(err) {
			return ErrPending
		}
		if err != nil {
			return fmt.Errorf("record erasure: %w", err)
		}
		body, err := json.Marshal(map[string]int64{"erasure_id": id})
		if err != nil {
			return fmt.Errorf("encode erasure request: %w", err)
		}
		a, err = s.gate.Hold(ctx, tx, actor, approval.Request{Kind: ApprovalKind, TargetID: pseudonym, Body: body,
			Summary: "erase the personal data of user " + pseudonym + " (irreversible)"})
		if err != nil {
			return err
		}
		if err := q.SetErasureApproval(ctx, sqlcdb.SetErasureApprovalParams{ApprovalID: &a.ID, ID: id}); err != nil {
			return fmt.Errorf("link erasure %d to approval %d: %w", id, a.ID, err)
		}
		var would map[string]any
		if err := json.Unmarshal(counts, &would); err != nil {
			return fmt.Errorf("read erasure check: %w", err)
		}
		if err := audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: ActionRequest, TargetType: TargetUser, TargetID: pseudonym,
			Reason: reason, At: now, Detail: map[string]any{"erasure_id": id, "approval_id": a.ID, "awaiting_approval": true, "rows": would}}); err != nil {
			return err
		}
		e, err = s.get(ctx, q, id)
		return err
	})
	if err != nil {
		return Erasure{}, approval.Approval{}, err
	}
	s.logger.InfoContext(ctx, "erasure awaits a second operator", "erasure_id", e.ID, "approval_id", a.ID, "actor", actor)
	return e, a, nil
}

// erase runs erase_user_data and translates its refusals.
func (s *Service) erase(ctx context.Context, q *sqlcdb.Queries, userID, pseudonym string, checkOnly bool) (json.RawMessage, error) {
	counts, err := q.EraseUserData(ctx, sqlcdb.EraseUserDataParams{UserID: userID, Pseudonym: pseudonym,
		Closed: payoutstate.Names(payoutstate.Status.Closed), CheckOnly: checkOnly})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "AEG01":
			return nil, ErrUnknownUser
		case "AEG02", "AEG03", "AEG04":
			return nil, &RefusedError{Reason: pgErr.Message}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("erase user data (check only %v): %w", checkOnly, err)
	}
	return counts, nil
}

// Get returns erasure id, or ErrNotFound.
func (s *Service) Get(ctx context.Context, id int64) (_ Erasure, err error) {
	defer fault.Mark(&err, what)
	return s.get(ctx, s.q, id)
}

func (s *Service) get(ctx context.Context, q *sqlcdb.Queries, id int64) (Erasure, error) {
	r, err := q.GetErasure(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Erasure{}, ErrNotFound
	}
	if err != nil {
		return Erasure{}, fmt.Errorf("get erasure %d: %w", id, err)
	}
	return Erasure(r), nil
}

// List returns the latest erasures, newest first.
func (s *Service) List(ctx context.Context, limit int) (_ []Erasure, err error) {
	defer fault.Mark(&err, what)
	limit, err = input.Limit(limit, input.MaxLimit)
	if err != nil {
		return nil, err
	}
	rows, err := s.q.ListErasures(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("list erasures: %w", err)
	}
	out := make([]Erasure, len(rows))
	for i, r := range rows {
		out[i] = Erasure(r)
	}
	return out, nil
}

// Approvals is the owner of held erasures: approving one runs it.
func (s *Service) Approvals() approval.Owner { return owner{s} }

type owner struct{ s *Service }

// Apply runs the erasure in the approval's transaction: its effect, the
// erasures row, the approval and the audit rows commit together or not at
// all. A refusal (money held since the request) aborts the approval, which
// stays pending: reject it, or approve it again once the money is out.
func (o owner) Apply(ctx context.Context, tx pgx.Tx, a approval.Approval, approver string) (approval.Outcome, error) {
	q := o.s.q.WithTx(tx)
	e, err := o.lock(ctx, q, a)
	if err != nil {
		return approval.Outcome{}, err
	}
	counts, err := o.s.erase(ctx, q, e.UserID, e.Pseudonym, false)
	if err != nil {
		return approval.Outcome{}, err
	}
	now := o.s.now()
	if err := q.FinishErasure(ctx, sqlcdb.FinishErasureParams{Status: StatusErased, ApprovedBy: approver, Counts: counts,
		DecidedAt: &now, ID: e.ID}); err != nil {
		return approval.Outcome{}, fmt.Errorf("finish erasure %d: %w", e.ID, err)
	}
	var rows map[string]any
	if err := json.Unmarshal(counts, &rows); err != nil {
		return approval.Outcome{}, fmt.Errorf("read erasure counts: %w", err)
	}
	if err := audit.Write(ctx, tx, audit.Entry{Actor: approver, Action: ActionErase, TargetType: TargetUser, TargetID: e.Pseudonym,
		Reason: e.Reason, At: now, Detail: map[string]any{"erasure_id": e.ID, "approval_id": a.ID, "requested_by": e.RequestedBy,
			"rows": rows}}); err != nil {
		return approval.Outcome{}, err
	}
	o.s.logger.InfoContext(ctx, "user data erased", "erasure_id", e.ID, "approval_id", a.ID, "approver", approver)
	return approval.Outcome{ResultID: e.Pseudonym, Detail: map[string]any{"erasure_id": e.ID, "pseudonym": e.Pseudonym}}, nil
}

// Reject closes the request without effect and forgets the user id.
func (o owner) Reject(ctx context.Context, tx pgx.Tx, a approval.Approval) (approval.Outcome, error) {
	q := o.s.q.WithTx(tx)
	e, err := o.lock(ctx, q, a)
	if err != nil {
		return approval.Outcome{}, err
	}
	now := o.s.now()
	if err := q.FinishErasure(ctx, sqlcdb.FinishErasureParams{Status: StatusRejected, DecidedAt: &now, ID: e.ID}); err != nil {
		return approval.Outcome{}, fmt.Errorf("reject erasure %d: %w", e.ID, err)
	}
	return approval.Outcome{Detail: map[string]any{"erasure_id": e.ID, "pseudonym": e.Pseudonym}}, nil
}

func (o owner) lock(ctx context.Context, q *sqlcdb.Queries, a approval.Approval) (sqlcdb.LockErasureRow, error) {
	var req struct {
		ErasureID int64 `json:"erasure_id"`
	}
	if err := json.Unmarshal(a.Request, &req); err != nil {
		return sqlcdb.LockErasureRow{}, fmt.Errorf("approval %d: decode its erasure: %w", a.ID, err)
	}
	e, err := q.LockErasure(ctx, req.ErasureID)
	if err != nil {
		return sqlcdb.LockErasureRow{}, fmt.Errorf("approval %d: lock erasure %d: %w", a.ID, req.ErasureID, err)
	}
	if e.Status != StatusPending || e.UserID == "" {
		return sqlcdb.LockErasureRow{}, fmt.Errorf("%w: erasure %d is %s", approval.ErrDecided, e.ID, e.Status)
	}
	return e, nil
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}
