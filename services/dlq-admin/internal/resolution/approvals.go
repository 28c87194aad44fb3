package resolution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/resolution/sqlcdb"
)

// Approval kinds (approvals.kind).
const (
	KindPayoutResolution = "payout_resolution"
	KindBulkReplay       = "bulk_replay"
)

// Approval statuses.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalRejected = "rejected"
)

// Approval is an action waiting for, or decided by, a second operator.
type Approval struct {
	ID             int64
	Kind           string
	TargetID       string
	Request        json.RawMessage
	Summary        string
	RequestedBy    string
	Status         string
	DecidedBy      *string
	DecisionReason *string
	// ResultID is what the approval released: the resolution id, or the
	// replay job's id.
	ResultID  *string
	CreatedAt time.Time
	DecidedAt *time.Time
}

// GateBulkReplay holds a bulk replay of more than the threshold's letters
// for a second operator: it records the approval and reports true. It
// reports false (run it now) when four-eyes is off or the replay is small.
func (s *Service) GateBulkReplay(ctx context.Context, actor string, req replay.BulkRequest) (Approval, bool, error) {
	if !s.cfg.RequireSecondApprover {
		return Approval{}, false, nil
	}
	p, err := s.replays.Preview(ctx, req)
	if err != nil {
		return Approval{}, false, err
	}
	if p.WouldReplay <= int64(s.cfg.Threshold) {
		return Approval{}, false, nil
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Approval{}, false, fmt.Errorf("encode bulk replay request: %w", err)
	}
	var a Approval
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.now()
		summary := fmt.Sprintf("bulk replay of %d dead letters (threshold %d)", p.WouldReplay, s.cfg.Threshold)
		q := s.q.WithTx(tx)
		id, err := q.InsertApproval(ctx, sqlcdb.InsertApprovalParams{Kind: KindBulkReplay, TargetID: "",
			Request: body, Summary: summary, RequestedBy: actor, RequestedPerson: s.persons.Of(actor), CreatedAt: now})
		if err != nil {
			return fmt.Errorf("record approval of a bulk replay: %w", err)
		}
		if err := audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: store.ActionBulkReplay, TargetType: TargetApproval,
			TargetID: strconv.FormatInt(id, 10), Reason: req.Reason, At: now,
			Detail: map[string]any{"awaiting_approval": true, "would_replay": p.WouldReplay}}); err != nil {
			return err
		}
		row, err := q.GetApproval(ctx, id)
		a = Approval(row)
		return err
	})
	if err != nil {
		return Approval{}, false, err
	}
	s.logger.InfoContext(ctx, "bulk replay awaits a second operator", "approval_id", a.ID, "actor", actor, "would_replay", p.WouldReplay)
	return a, true, nil
}

// Approvals lists approvals, newest first; status "" is every status.
func (s *Service) Approvals(ctx context.Context, status string, limit int) ([]Approval, error) {
	if status != "" && status != ApprovalPending && status != ApprovalApproved && status != ApprovalRejected {
		return nil, &input.Invalid{Param: "status", Reason: "must be pending, approved or rejected"}
	}
	limit, err := input.Limit(limit, input.MaxLimit)
	if err != nil {
		return nil, err
	}
	rows, err := s.q.ListApprovals(ctx, sqlcdb.ListApprovalsParams{Status: status, MaxRows: limit})
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	out := make([]Approval, len(rows))
	for i, r := range rows {
		out[i] = Approval(r)
	}
	return out, nil
}

// Approval returns approval id, or ErrApprovalNotFound.
func (s *Service) Approval(ctx context.Context, id int64) (Approval, error) {
	row, err := s.q.GetApproval(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Approval{}, ErrApprovalNotFound
	}
	if err != nil {
		return Approval{}, fmt.Errorf("get approval %d: %w", id, err)
	}
	return Approval(row), nil
}

// Approve lets approval id take effect on behalf of actor, who must not
// be its requester: a resolution is sent to payout-worker, a bulk replay
// job is created, in the transaction that records the approval and its
// audit_log row. Errors: ErrApprovalNotFound, ErrApprovalDecided,
// ErrSameOperator.
func (s *Service) Approve(ctx context.Context, id int64, actor, reason string) (Approval, error) {
	return s.decide(ctx, id, actor, reason, true)
}

// Reject closes approval id without effect; the reason is required. The
// requester may withdraw their own request this way.
func (s *Service) Reject(ctx context.Context, id int64, actor, reason string) (Approval, error) {
	if strings.TrimSpace(reason) == "" {
		return Approval{}, &input.Invalid{Param: "reason", Reason: "is required: say why this is rejected"}
	}
	return s.decide(ctx, id, actor, reason, false)
}

func (s *Service) decide(ctx context.Context, id int64, actor, reason string, approve bool) (Approval, error) {
	reason = strings.TrimSpace(reason)
	if len(reason) > replay.MaxReasonLength {
		return Approval{}, &input.Invalid{Param: "reason", Reason: fmt.Sprintf("must be at most %d characters", replay.MaxReasonLength)}
	}
	var out Approval
	sent := false
	err := database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		row, err := q.LockApproval(ctx, id)
		a := Approval(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrApprovalNotFound
		}
		if err != nil {
			return fmt.Errorf("lock approval %d: %w", id, err)
		}
		if a.Status != ApprovalPending {
			return fmt.Errorf("%w: approval %d is %s", ErrApprovalDecided, id, a.Status)
		}
		if approve {
			same, err := s.samePerson(ctx, q, a, actor)
			if err != nil {
				return err
			}
			if same {
				return ErrSameOperator
			}
		}
		now := s.now()
		status, result := ApprovalRejected, ""
		detail := map[string]any{"kind": a.Kind, "requested_by": a.RequestedBy}
		switch {
		case a.Kind == KindPayoutResolution:
			st, err := q.ResolutionStatus(ctx, a.TargetID)
			if err != nil {
				return fmt.Errorf("approval %d: resolution %s: %w", id, a.TargetID, err)
			}
			if st != StatusAwaitingApproval {
				return fmt.Errorf("%w: its resolution is %s", ErrApprovalDecided, st)
			}
			result = a.TargetID
			if approve {
				oid, err := s.send(ctx, tx, a.TargetID, actor)
				if err != nil {
					return err
				}
				status, sent = ApprovalApproved, true
				detail["outbox_id"] = oid
			} else if err := q.RejectResolution(ctx, sqlcdb.RejectResolutionParams{ID: a.TargetID, DecidedAt: now}); err != nil {
				return fmt.Errorf("reject resolution %s: %w", a.TargetID, err)
			}
			detail["resolution_id"] = a.TargetID
		case a.Kind == KindBulkReplay && approve:
			var req replay.BulkRequest
			if err := json.Unmarshal(a.Request, &req); err != nil {
				return fmt.Errorf("approval %d: decode its bulk replay: %w", id, err)
			}
			j, err := s.replays.CreateJobTx(ctx, tx, a.RequestedBy, req, map[string]any{"approval_id": a.ID, "approved_by": actor})
			if err != nil {
				return err
			}
			status, result = ApprovalApproved, strconv.FormatInt(j.ID, 10)
			detail["replay_job_id"] = j.ID
		}
		decided, err := q.DecideApproval(ctx, sqlcdb.DecideApprovalParams{ID: id, Status: status, DecidedBy: actor,
			DecisionReason: reason, ResultID: result, DecidedAt: now, DecidedPerson: s.persons.Of(actor)})
		if err != nil {
			return fmt.Errorf("decide approval %d: %w", id, err)
		}
		out = Approval(decided)
		action := ActionReject
		if approve {
			action = ActionApprove
		}
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: action, TargetType: TargetApproval,
			TargetID: strconv.FormatInt(id, 10), Reason: reason, Detail: detail, At: now})
	})
	if err != nil {
		return Approval{}, err
	}
	if sent {
		s.notify()
	}
	s.logger.InfoContext(ctx, "approval decided", "approval_id", id, "status", out.Status, "actor", actor)
	return out, nil
}

// samePerson reports whether actor is the person who asked for approval a:
// the person recorded with the request (normalised), or, for a request
// from before persons were recorded, the person its token names now. Two
// tokens of one person, or two spellings of one name, are one person.
func (s *Service) samePerson(ctx context.Context, q *sqlcdb.Queries, a Approval, actor string) (bool, error) {
	if s.persons.Same(a.RequestedBy, actor) {
		return true, nil
	}
	requester, err := q.ApprovalRequester(ctx, a.ID)
	if err != nil {
		return false, fmt.Errorf("approval %d: its requester: %w", a.ID, err)
	}
	return requester != "" && requester == s.persons.Of(actor), nil
}
