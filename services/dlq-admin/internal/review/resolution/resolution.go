package resolution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/payouts"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/resolution/sqlcdb"
)

// Resolution statuses (payout_resolutions_state.status): dlq-admin's
// awaiting_approval, pending and rejected; payout-worker's verdict,
// applied or refused.
const (
	StatusAwaitingApproval = "awaiting_approval"
	StatusPending          = "pending"
	StatusApplied          = "applied"
	StatusRefused          = "refused"
	StatusRejected         = "rejected"
)

// The audit action and target type of a resolution.
const (
	ActionResolve     = "payout_resolve"
	TargetPayout      = "payout"
	maxObjectIDLength = 255
)

// ApprovalKind is the approvals.kind of a resolution held for a second
// operator.
const ApprovalKind = "payout_resolution"

// what is the part of dlq-admin this package's errors are marked with.
const what = "the resolution store"

// Errors the API maps to statuses.
var (
	// ErrNotInReview: the payout is not in NEEDS_REVIEW (409).
	ErrNotInReview = errors.New("payout is not in NEEDS_REVIEW")
	// ErrInFlight: the payout already has a resolution waiting for its
	// approval or its verdict (409).
	ErrInFlight = errors.New("payout already has a resolution awaiting approval or the worker's verdict")
	// ErrNotFound: no resolution with this id (404).
	ErrNotFound = errors.New("resolution not found")
)

// objectIDPattern is a PSP object id: po_…, tr_…, TRF_…, a reference.
var objectIDPattern = regexp.MustCompile(`^[A-Za-z0-9_\-.:]+$`)

// Service records resolutions.
type Service struct {
	pool     *pgxpool.Pool
	q        *sqlcdb.Queries
	logger   *slog.Logger
	now      func() time.Time
	notifier interface{ Notify() }
	// gate holds a resolution of a payout of more than amount for a second
	// operator (WithApproval); nil holds none.
	gate   *approval.Gate
	amount int64
}

// New returns a Service.
func New(pool *pgxpool.Pool, deps lifecycle.Deps) *Service {
	deps = deps.WithDefaults()
	return &Service{pool: pool, q: sqlcdb.New(pool), logger: deps.Logger.With("component", "resolution"), now: deps.Clock}
}

// WithApproval holds a resolution of a payout of more than amount (in the
// currency's minor units; 0 is every one) at gate for a second operator,
// when the gate requires one; the service is then the owner of those
// requests (Approvals).
func (s *Service) WithApproval(gate *approval.Gate, amount int64) *Service {
	s.gate, s.amount = gate, amount
	return s
}

// WithNotifier wakes the relays after a commit that wrote a command.
func (s *Service) WithNotifier(n interface{ Notify() }) *Service {
	s.notifier = n
	return s
}

func (s *Service) notify() {
	if s.notifier != nil {
		s.notifier.Notify()
	}
}

// Request is an operator's resolution.
type Request struct {
	Outcome     string
	Reason      string
	PSPObjectID string
}

// Validate returns a *input.Invalid naming the first bad field.
func (r Request) Validate() error {
	if r.Outcome != event.ResolutionPaid && r.Outcome != event.ResolutionFailed {
		return &input.Invalid{Param: "outcome", Reason: `is required: "paid" or "failed"`}
	}
	if err := input.CheckReason(r.Reason, "say why you resolve this payout so"); err != nil {
		return err
	}
	if r.PSPObjectID == "" {
		return &input.Invalid{Param: "psp_object_id", Reason: "is required: the PSP's object (po_…, tr_…, TRF_…) you checked"}
	}
	if len(r.PSPObjectID) > maxObjectIDLength || !objectIDPattern.MatchString(r.PSPObjectID) {
		return &input.Invalid{Param: "psp_object_id", Reason: "must be a PSP object id such as po_1Abc (letters, digits, _ - . :)"}
	}
	return nil
}

// Resolution is a payout_resolutions_state row: the request with the
// worker's verdict.
type Resolution struct {
	ID          string
	PayoutID    string
	UserID      string
	Outcome     string
	Reason      string
	PSPObjectID string
	RequestedBy string
	Status      string
	PSPAnswer   *string
	ApprovedBy  *string
	OutboxID    *int64
	CreatedAt   time.Time
	DecidedAt   *time.Time
	// ApprovalID is the approval it waits for (four-eyes), if any.
	ApprovalID *int64
}

// NotInReviewError says what state the payout is in instead.
type NotInReviewError struct{ Status string }

func (e *NotInReviewError) Error() string {
	return fmt.Sprintf("payout is %s, not NEEDS_REVIEW: only a payout in review can be resolved", e.Status)
}

// Is makes errors.Is(err, ErrNotInReview) true.
func (e *NotInReviewError) Is(target error) bool { return target == ErrNotInReview }

// Resolve records actor's resolution of payout payoutID and, unless a second
// approver is required, sends it to payout-worker, in one transaction with
// its audit_log row. Errors: *input.Invalid, payouts.ErrPayoutNotFound,
// ErrNotInReview, ErrInFlight.
func (s *Service) Resolve(ctx context.Context, payoutID, actor string, req Request) (_ Resolution, err error) {
	defer fault.Mark(&err, what)
	req.Reason = strings.TrimSpace(req.Reason)
	req.PSPObjectID = strings.TrimSpace(req.PSPObjectID)
	if err := req.Validate(); err != nil {
		return Resolution{}, err
	}
	var out Resolution
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		p, err := q.PayoutForResolution(ctx, payoutID)
		if errors.Is(err, pgx.ErrNoRows) {
			return payouts.ErrPayoutNotFound
		}
		if err != nil {
			return fmt.Errorf("resolve payout %s: %w", payoutID, err)
		}
		if !payoutstate.Status(p.Status).Reviewable() {
			return &NotInReviewError{Status: p.Status}
		}
		now := s.now()
		st := StatusPending
		if s.gate.Required() && p.Amount > s.amount {
			st = StatusAwaitingApproval
		}
		id := uuid.Must(uuid.NewV7()).String()
		if err := q.CloseDecided(ctx, payoutID); err != nil {
			return fmt.Errorf("close decided resolutions of payout %s: %w", payoutID, err)
		}
		if err := q.InsertResolution(ctx, sqlcdb.InsertResolutionParams{ID: id, PayoutID: payoutID, UserID: p.UserID,
			Outcome: req.Outcome, Reason: req.Reason, PSPObjectID: req.PSPObjectID, RequestedBy: actor, Status: st,
			CreatedAt: now}); err != nil {
			if database.IsUniqueViolation(err, "payout_resolutions_open_idx") {
				return ErrInFlight
			}
			return fmt.Errorf("record resolution of payout %s: %w", payoutID, err)
		}
		detail := map[string]any{"resolution_id": id, "outcome": req.Outcome, "psp_object_id": req.PSPObjectID, "status": st}
		if st == StatusPending {
			if _, err := s.send(ctx, tx, id, ""); err != nil {
				return err
			}
		} else {
			summary := fmt.Sprintf("resolve payout %s as %s (evidence %s)", payoutID, req.Outcome, req.PSPObjectID)
			a, err := s.gate.Hold(ctx, tx, actor, approval.Request{Kind: ApprovalKind, TargetID: id, Summary: summary})
			if err != nil {
				return err
			}
			detail["approval_id"] = a.ID
		}
		if err := audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: ActionResolve, TargetType: TargetPayout,
			TargetID: payoutID, Reason: req.Reason, Detail: detail, At: now}); err != nil {
			return err
		}
		out, err = get(ctx, q, id)
		return err
	})
	if err != nil {
		return Resolution{}, err
	}
	if out.Status == StatusPending {
		s.notify()
	}
	s.logger.InfoContext(ctx, "payout resolution recorded", "payout_id", payoutID, "resolution_id", out.ID,
		"outcome", out.Outcome, "status", out.Status, "actor", actor)
	return out, nil
}

// send writes resolution id's command to the outbox, marks it pending
// (approved by approver, if any) and returns the outbox row's id.
func (s *Service) send(ctx context.Context, tx pgx.Tx, id, approver string) (int64, error) {
	q := s.q.WithTx(tx)
	r, err := get(ctx, q, id)
	if err != nil {
		return 0, err
	}
	corr, err := q.PayoutCorrelation(ctx, r.PayoutID)
	if err != nil {
		return 0, fmt.Errorf("resolution %s: payout %s: %w", id, r.PayoutID, err)
	}
	body, err := json.Marshal(event.PayoutResolution{ResolutionID: id, PayoutID: r.PayoutID, UserID: r.UserID,
		Outcome: r.Outcome, Reason: r.Reason, PSPObjectID: r.PSPObjectID, Operator: r.RequestedBy, ApprovedBy: approver})
	if err != nil {
		return 0, fmt.Errorf("encode resolution %s: %w", id, err)
	}
	oid, err := outbox.Insert(ctx, tx, outbox.Message{
		Topic: kafkax.TopicTransactions, EventType: string(event.TypePayoutResolution), PartitionKey: r.UserID,
		Payload: body, CorrelationID: corr,
		Headers: map[string]string{
			kafkax.HeaderCorrelationID: corr,
			kafkax.HeaderEventType:     string(event.TypePayoutResolution),
			kafkax.HeaderMessageID:     event.PayoutResolutionID(id),
		},
	})
	if err != nil {
		return 0, fmt.Errorf("send resolution %s: %w", id, err)
	}
	if err := q.MarkSent(ctx, sqlcdb.MarkSentParams{ID: id, OutboxID: oid, ApprovedBy: approver}); err != nil {
		return 0, fmt.Errorf("send resolution %s: %w", id, err)
	}
	return oid, nil
}

// Get returns resolution id, or ErrNotFound.
func (s *Service) Get(ctx context.Context, id string) (_ Resolution, err error) {
	defer fault.Mark(&err, what)
	if _, err := uuid.Parse(id); err != nil {
		return Resolution{}, ErrNotFound
	}
	return get(ctx, s.q, id)
}

// ForPayout returns the payout's resolutions, newest first.
func (s *Service) ForPayout(ctx context.Context, payoutID string) (_ []Resolution, err error) {
	defer fault.Mark(&err, what)
	rows, err := s.q.ResolutionsOfPayout(ctx, payoutID)
	if err != nil {
		return nil, fmt.Errorf("list resolutions of payout %s: %w", payoutID, err)
	}
	out := make([]Resolution, len(rows))
	for i, r := range rows {
		out[i] = Resolution(r)
	}
	return out, nil
}

// get reads resolution id through q (on the pool or a transaction).
func get(ctx context.Context, q *sqlcdb.Queries, id string) (Resolution, error) {
	r, err := q.GetResolution(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Resolution{}, ErrNotFound
	}
	if err != nil {
		return Resolution{}, fmt.Errorf("get resolution %s: %w", id, err)
	}
	return Resolution(r), nil
}

// Approvals is the owner of held resolutions: approving one sends it to
// payout-worker, rejecting one closes it unsent.
func (s *Service) Approvals() approval.Owner { return approvals{s} }

type approvals struct{ s *Service }

func (o approvals) Apply(ctx context.Context, tx pgx.Tx, a approval.Approval, approver string) (approval.Outcome, error) {
	if err := o.awaiting(ctx, tx, a); err != nil {
		return approval.Outcome{}, err
	}
	oid, err := o.s.send(ctx, tx, a.TargetID, approver)
	if err != nil {
		return approval.Outcome{}, err
	}
	return approval.Outcome{ResultID: a.TargetID, Detail: map[string]any{"resolution_id": a.TargetID, "outbox_id": oid},
		AfterCommit: o.s.notify}, nil
}

func (o approvals) Reject(ctx context.Context, tx pgx.Tx, a approval.Approval) (approval.Outcome, error) {
	if err := o.awaiting(ctx, tx, a); err != nil {
		return approval.Outcome{}, err
	}
	if err := o.s.q.WithTx(tx).RejectResolution(ctx, sqlcdb.RejectResolutionParams{ID: a.TargetID, DecidedAt: o.s.now()}); err != nil {
		return approval.Outcome{}, fmt.Errorf("reject resolution %s: %w", a.TargetID, err)
	}
	return approval.Outcome{ResultID: a.TargetID, Detail: map[string]any{"resolution_id": a.TargetID}}, nil
}

// awaiting checks that a's resolution still waits for its approval.
func (o approvals) awaiting(ctx context.Context, tx pgx.Tx, a approval.Approval) error {
	st, err := o.s.q.WithTx(tx).ResolutionStatus(ctx, a.TargetID)
	if err != nil {
		return fmt.Errorf("approval %d: resolution %s: %w", a.ID, a.TargetID, err)
	}
	if st != StatusAwaitingApproval {
		return fmt.Errorf("%w: its resolution is %s", approval.ErrDecided, st)
	}
	return nil
}
