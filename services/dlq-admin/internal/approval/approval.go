package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval/person"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
)

// what is the part of dlq-admin this package's errors are marked with.
const what = "the approval gate"

// Approval statuses.
const (
	StatusPending  = "pending"
	StatusApproved = "approved"
	StatusRejected = "rejected"
)

// The audit actions of a decision and the target type of an approval.
const (
	ActionApprove  = "approve"
	ActionReject   = "reject"
	TargetApproval = "approval"
)

// Errors the API maps to statuses.
var (
	// ErrNotFound: no approval with this id (404).
	ErrNotFound = errors.New("approval not found")
	// ErrDecided: approved or rejected already, or what it holds was
	// decided some other way (409).
	ErrDecided = errors.New("approval already decided")
	// ErrSameOperator: the requester cannot approve their own request (403).
	ErrSameOperator = errors.New("a second, different operator must approve this")
)

// Approval is a request waiting for, or decided by, a second operator.
type Approval struct {
	ID       int64
	Kind     string
	TargetID string
	// Request is the owner's own record of what to do, if it keeps one here.
	Request     json.RawMessage
	Summary     string
	RequestedBy string
	Status      string
	DecidedBy   *string
	// DecisionReason is the approver's or rejecter's reason.
	DecisionReason *string
	// ResultID is what the approval released, in the owner's words (a
	// resolution id, a replay job id).
	ResultID  *string
	CreatedAt time.Time
	DecidedAt *time.Time
}

// Request is what an owner holds for a second operator.
type Request struct {
	// Kind names the owner (Register).
	Kind string
	// TargetID is what the request is about, in the owner's words; "" for
	// none.
	TargetID string
	// Body is the owner's record of the request; nil is {}.
	Body json.RawMessage
	// Summary says in one line what approving does.
	Summary string
}

// Outcome is what an owner did with a decided request.
type Outcome struct {
	// ResultID is what approving released ("" for nothing).
	ResultID string
	// Detail is added to the decision's audit_log row.
	Detail map[string]any
	// AfterCommit, if set, runs once the decision has committed (to wake a
	// relay for the command it wrote, say).
	AfterCommit func()
}

// Owner applies the requests of one kind. Both calls run in the
// transaction that records the decision and its audit_log row, with the
// approval locked: what they write commits with the decision or not at
// all. An error aborts the decision.
type Owner interface {
	// Apply carries out approved request a on behalf of approver.
	Apply(ctx context.Context, tx pgx.Tx, a Approval, approver string) (Outcome, error)
	// Reject closes rejected request a without effect.
	Reject(ctx context.Context, tx pgx.Tx, a Approval) (Outcome, error)
}

// Gate holds requests for a second operator and, once one decides, hands
// them to the owner of their kind.
type Gate struct {
	pool     *pgxpool.Pool
	q        *sqlcdb.Queries
	required bool
	owners   map[string]Owner
	logger   *slog.Logger
	now      func() time.Time
	// persons says which person holds each token (four-eyes compares
	// persons); nil: every token is a person of its own name.
	persons *person.Directory
}

// New returns a Gate; required is REQUIRE_SECOND_APPROVER (owners hold
// nothing for a second operator without it).
func New(pool *pgxpool.Pool, required bool, deps lifecycle.Deps) *Gate {
	deps = deps.WithDefaults()
	return &Gate{pool: pool, q: sqlcdb.New(pool), required: required, owners: map[string]Owner{},
		logger: deps.Logger.With("component", "approval"), now: deps.Clock}
}

// WithPersons sets who holds each token (DLQ_ADMIN_TOKEN_PERSONS).
func (g *Gate) WithPersons(d *person.Directory) *Gate {
	g.persons = d
	return g
}

// Register makes o the owner of the requests of kind. It is called while
// dlq-admin is wired, before the gate serves a request.
func (g *Gate) Register(kind string, o Owner) *Gate {
	g.owners[kind] = o
	return g
}

// Required reports whether actions wait for a second operator at all.
func (g *Gate) Required() bool { return g != nil && g.required }

// Hold records r, requested by actor, as pending within tx, the owner's
// transaction, so that the request and what the owner records with it
// commit together.
func (g *Gate) Hold(ctx context.Context, tx pgx.Tx, actor string, r Request) (_ Approval, err error) {
	defer fault.Mark(&err, what)
	if _, ok := g.owners[r.Kind]; !ok {
		return Approval{}, fmt.Errorf("hold a %s request: no owner applies that kind", r.Kind)
	}
	body := r.Body
	if body == nil {
		body = json.RawMessage("{}")
	}
	q := g.q.WithTx(tx)
	id, err := q.InsertApproval(ctx, sqlcdb.InsertApprovalParams{Kind: r.Kind, TargetID: r.TargetID,
		Request: body, Summary: r.Summary, RequestedBy: actor, RequestedPerson: g.persons.Of(actor), CreatedAt: g.now()})
	if err != nil {
		return Approval{}, fmt.Errorf("record approval of a %s request: %w", r.Kind, err)
	}
	row, err := q.GetApproval(ctx, id)
	if err != nil {
		return Approval{}, fmt.Errorf("read approval %d: %w", id, err)
	}
	return Approval(row), nil
}

// Approvals lists approvals, newest first; status "" is every status.
func (g *Gate) Approvals(ctx context.Context, status string, limit int) (_ []Approval, err error) {
	defer fault.Mark(&err, what)
	if status != "" && status != StatusPending && status != StatusApproved && status != StatusRejected {
		return nil, &input.Invalid{Param: "status", Reason: "must be pending, approved or rejected"}
	}
	limit, err = input.Limit(limit, input.MaxLimit)
	if err != nil {
		return nil, err
	}
	rows, err := g.q.ListApprovals(ctx, sqlcdb.ListApprovalsParams{Status: status, MaxRows: limit})
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	out := make([]Approval, len(rows))
	for i, r := range rows {
		out[i] = Approval(r)
	}
	return out, nil
}

// Approval returns approval id, or ErrNotFound.
func (g *Gate) Approval(ctx context.Context, id int64) (_ Approval, err error) {
	defer fault.Mark(&err, what)
	row, err := g.q.GetApproval(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Approval{}, ErrNotFound
	}
	if err != nil {
		return Approval{}, fmt.Errorf("get approval %d: %w", id, err)
	}
	return Approval(row), nil
}

// Approve lets approval id take effect on behalf of actor, who must not
// be its requester: its owner applies it in the transaction that records
// the approval and its audit_log row. Errors: ErrNotFound, ErrDecided,
// ErrSameOperator, and the owner's.
func (g *Gate) Approve(ctx context.Context, id int64, actor, reason string) (Approval, error) {
	return g.decide(ctx, id, actor, reason, true)
}

// Reject closes approval id without effect; the reason is required. Anyone
// may reject, the requester included (a withdrawal); only an approval needs
// a second person (approvals_second_person).
func (g *Gate) Reject(ctx context.Context, id int64, actor, reason string) (Approval, error) {
	if strings.TrimSpace(reason) == "" {
		return Approval{}, &input.Invalid{Param: "reason", Reason: "is required: say why this is rejected"}
	}
	return g.decide(ctx, id, actor, reason, false)
}

func (g *Gate) decide(ctx context.Context, id int64, actor, reason string, approve bool) (_ Approval, err error) {
	defer fault.Mark(&err, what)
	reason = strings.TrimSpace(reason)
	if err := input.CheckReason(reason, ""); err != nil {
		return Approval{}, err
	}
	var out Approval
	var done Outcome
	err = database.InTx(ctx, g.pool, func(tx pgx.Tx) error {
		q := g.q.WithTx(tx)
		row, err := q.LockApproval(ctx, id)
		a := Approval(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("lock approval %d: %w", id, err)
		}
		if a.Status != StatusPending {
			return fmt.Errorf("%w: approval %d is %s", ErrDecided, id, a.Status)
		}
		owner, ok := g.owners[a.Kind]
		if !ok {
			return fmt.Errorf("approval %d: no owner applies a %s request", id, a.Kind)
		}
		status, action := StatusRejected, ActionReject
		if approve {
			same, err := g.samePerson(ctx, q, a, actor)
			if err != nil {
				return err
			}
			if same {
				return ErrSameOperator
			}
			status, action = StatusApproved, ActionApprove
			done, err = owner.Apply(ctx, tx, a, actor)
			if err != nil {
				return err
			}
		} else if done, err = owner.Reject(ctx, tx, a); err != nil {
			return err
		}
		now := g.now()
		decided, err := q.DecideApproval(ctx, sqlcdb.DecideApprovalParams{ID: id, Status: status, DecidedBy: actor,
			DecisionReason: reason, ResultID: done.ResultID, DecidedAt: now, DecidedPerson: g.persons.Of(actor)})
		if err != nil {
			return fmt.Errorf("decide approval %d: %w", id, err)
		}
		out = Approval(decided)
		detail := map[string]any{"kind": a.Kind, "requested_by": a.RequestedBy}
		for k, v := range done.Detail {
			detail[k] = v
		}
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: action, TargetType: TargetApproval,
			TargetID: audit.ID(id), Reason: reason, Detail: detail, At: now})
	})
	if err != nil {
		return Approval{}, err
	}
	if done.AfterCommit != nil {
		done.AfterCommit()
	}
	g.logger.InfoContext(ctx, "approval decided", "approval_id", id, "kind", out.Kind, "status", out.Status, "actor", actor)
	return out, nil
}

// samePerson reports whether actor is the person who asked for approval a:
// the person recorded with the request (normalised), or, for a request
// from before persons were recorded, the person its token names now. Two
// tokens of one person, or two spellings of one name, are one person.
func (g *Gate) samePerson(ctx context.Context, q *sqlcdb.Queries, a Approval, actor string) (bool, error) {
	if g.persons.Same(a.RequestedBy, actor) {
		return true, nil
	}
	requester, err := q.ApprovalRequester(ctx, a.ID)
	if err != nil {
		return false, fmt.Errorf("approval %d: its requester: %w", a.ID, err)
	}
	return requester != "" && requester == g.persons.Of(actor), nil
}
