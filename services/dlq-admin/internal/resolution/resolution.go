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
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/person"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/resolution/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/payouts"
)

// Resolution statuses (payout_resolutions.status).
const (
	StatusAwaitingApproval = "awaiting_approval"
	StatusPending          = "pending"
	StatusApplied          = "applied"
	StatusRefused          = "refused"
	StatusRejected         = "rejected"
)

// Audit actions and targets written here.
const (
	ActionResolve     = "payout_resolve"
	ActionApprove     = "approve"
	ActionReject      = "reject"
	TargetPayout      = "payout"
	TargetApproval    = "approval"
	statusNeedsReview = "NEEDS_REVIEW"
	maxObjectIDLength = 255
)

// Errors the API maps to statuses.
var (
	// ErrNotInReview: the payout is not in NEEDS_REVIEW (409).
	ErrNotInReview = errors.New("payout is not in NEEDS_REVIEW")
	// ErrInFlight: the payout already has a resolution waiting for its
	// approval or its verdict (409).
	ErrInFlight = errors.New("payout already has a resolution awaiting approval or the worker's verdict")
	// ErrNotFound: no resolution with this id (404).
	ErrNotFound = errors.New("resolution not found")
	// ErrApprovalNotFound: no approval with this id (404).
	ErrApprovalNotFound = errors.New("approval not found")
	// ErrApprovalDecided: approved or rejected already (409).
	ErrApprovalDecided = errors.New("approval already decided")
	// ErrSameOperator: the requester cannot approve their own request (403).
	ErrSameOperator = errors.New("a second, different operator must approve this")
)

// objectIDPattern is a PSP object id: po_…, tr_…, TRF_…, a reference.
var objectIDPattern = regexp.MustCompile(`^[A-Za-z0-9_\-.:]+$`)

// Config is REQUIRE_SECOND_APPROVER, SECOND_APPROVER_THRESHOLD and
// SECOND_APPROVER_RESOLUTION_AMOUNT.
type Config struct {
	RequireSecondApprover bool
	// Threshold: a bulk replay of more letters than this needs a second
	// operator (with RequireSecondApprover).
	Threshold int
	// ResolutionAmount: a resolution of a payout of more than this (in the
	// currency's minor units) needs a second operator (with
	// RequireSecondApprover); 0, the default, is every resolution.
	ResolutionAmount int64
}

// Service records resolutions and approvals.
type Service struct {
	pool     *pgxpool.Pool
	q        *sqlcdb.Queries
	replays  *replay.Service
	cfg      Config
	logger   *slog.Logger
	now      func() time.Time
	notifier interface{ Notify() }
	// persons says which person holds each token (four-eyes compares
	// persons); nil: every token is a person of its own name.
	persons *person.Directory
}

// New returns a Service; replays creates the bulk replay jobs approvals
// release.
func New(pool *pgxpool.Pool, replays *replay.Service, cfg Config, deps lifecycle.Deps) *Service {
	deps = deps.WithDefaults()
	return &Service{pool: pool, q: sqlcdb.New(pool), replays: replays, cfg: cfg, logger: deps.Logger.With("component", "resolution"), now: deps.Clock}
}

// WithPersons sets who holds each token (DLQ_ADMIN_TOKEN_PERSONS).
func (s *Service) WithPersons(d *person.Directory) *Service {
	s.persons = d
	return s
}

// WithNotifier wakes the relays after a commit that wrote a command.
func (s *Service) WithNotifier(n interface{ Notify() }) *Service {
	s.notifier = n
	return s
}

// Config returns the four-eyes settings (GET /v1/me shows them to the page).
func (s *Service) Config() Config { return s.cfg }

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
	if strings.TrimSpace(r.Reason) == "" {
		return &input.Invalid{Param: "reason", Reason: "is required: say why you resolve this payout so"}
	}
	if len(r.Reason) > replay.MaxReasonLength {
		return &input.Invalid{Param: "reason", Reason: fmt.Sprintf("must be at most %d characters", replay.MaxReasonLength)}
	}
	if r.PSPObjectID == "" {
		return &input.Invalid{Param: "psp_object_id", Reason: "is required: the PSP's object (po_…, tr_…, TRF_…) you checked"}
	}
	if len(r.PSPObjectID) > maxObjectIDLength || !objectIDPattern.MatchString(r.PSPObjectID) {
		return &input.Invalid{Param: "psp_object_id", Reason: "must be a PSP object id such as po_1Abc (letters, digits, _ - . :)"}
	}
	return nil
}

// Resolution is a payout_resolutions row.
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
func (s *Service) Resolve(ctx context.Context, payoutID, actor string, req Request) (Resolution, error) {
	req.Reason = strings.TrimSpace(req.Reason)
	req.PSPObjectID = strings.TrimSpace(req.PSPObjectID)
	if err := req.Validate(); err != nil {
		return Resolution{}, err
	}
	var out Resolution
	err := database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		p, err := q.PayoutForResolution(ctx, payoutID)
		if errors.Is(err, pgx.ErrNoRows) {
			return payouts.ErrPayoutNotFound
		}
		if err != nil {
			return fmt.Errorf("resolve payout %s: %w", payoutID, err)
		}
		if p.Status != statusNeedsReview {
			return &NotInReviewError{Status: p.Status}
		}
		now := s.now()
		st := StatusPending
		if s.cfg.RequireSecondApprover && p.Amount > s.cfg.ResolutionAmount {
			st = StatusAwaitingApproval
		}
		id := uuid.Must(uuid.NewV7()).String()
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
			aid, err := q.InsertApproval(ctx, sqlcdb.InsertApprovalParams{Kind: KindPayoutResolution, TargetID: id,
				Request: []byte("{}"), Summary: summary, RequestedBy: actor, RequestedPerson: s.persons.Of(actor), CreatedAt: now})
			if err != nil {
				return fmt.Errorf("record approval of resolution %s: %w", id, err)
			}
			detail["approval_id"] = aid
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
func (s *Service) Get(ctx context.Context, id string) (Resolution, error) {
	if _, err := uuid.Parse(id); err != nil {
		return Resolution{}, ErrNotFound
	}
	return get(ctx, s.q, id)
}

// ForPayout returns the payout's resolutions, newest first.
func (s *Service) ForPayout(ctx context.Context, payoutID string) ([]Resolution, error) {
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
