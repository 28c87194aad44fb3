package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
)

// ApprovalKind is the approvals.kind of a bulk replay held for a second
// operator.
const ApprovalKind = "bulk_replay"

// WithApproval holds a bulk replay of more than threshold letters at gate
// for a second operator (when the gate requires one); the service is then
// the owner of those requests (BulkApprovals).
func (s *Service) WithApproval(gate *approval.Gate, threshold int) *Service {
	s.gate, s.threshold = gate, threshold
	return s
}

// HoldBulk holds a bulk replay of more than the threshold's letters for a
// second operator: it records the approval, with req as its request, and
// reports true. It reports false (run it now) when no second operator is
// required or the replay is small.
func (s *Service) HoldBulk(ctx context.Context, actor string, req BulkRequest) (_ approval.Approval, _ bool, err error) {
	defer fault.Mark(&err, what)
	if !s.gate.Required() {
		return approval.Approval{}, false, nil
	}
	p, err := s.Preview(ctx, req)
	if err != nil {
		return approval.Approval{}, false, err
	}
	if p.WouldReplay <= int64(s.threshold) {
		return approval.Approval{}, false, nil
	}
	body, err := json.Marshal(req)
	if err != nil {
		return approval.Approval{}, false, fmt.Errorf("encode bulk replay request: %w", err)
	}
	var a approval.Approval
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		a, err = s.gate.Hold(ctx, tx, actor, approval.Request{Kind: ApprovalKind, Body: body,
			Summary: fmt.Sprintf("bulk replay of %d dead letters (threshold %d)", p.WouldReplay, s.threshold)})
		if err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: store.ActionBulkReplay, TargetType: approval.TargetApproval,
			TargetID: audit.ID(a.ID), Reason: req.Reason, At: a.CreatedAt,
			Detail: map[string]any{"awaiting_approval": true, "would_replay": p.WouldReplay}})
	})
	if err != nil {
		return approval.Approval{}, false, err
	}
	s.logger.InfoContext(ctx, "bulk replay awaits a second operator", "approval_id", a.ID, "actor", actor, "would_replay", p.WouldReplay)
	return a, true, nil
}

// BulkApprovals is the owner of held bulk replays: approving one creates
// its replay job, as its requester asked for it.
func (s *Service) BulkApprovals() approval.Owner { return bulkApprovals{s} }

type bulkApprovals struct{ s *Service }

func (b bulkApprovals) Apply(ctx context.Context, tx pgx.Tx, a approval.Approval, approver string) (approval.Outcome, error) {
	var req BulkRequest
	if err := json.Unmarshal(a.Request, &req); err != nil {
		return approval.Outcome{}, fmt.Errorf("approval %d: decode its bulk replay: %w", a.ID, err)
	}
	j, err := b.s.createJobTx(ctx, tx, a.RequestedBy, req, map[string]any{"approval_id": a.ID, "approved_by": approver})
	if err != nil {
		return approval.Outcome{}, err
	}
	return approval.Outcome{ResultID: strconv.FormatInt(j.ID, 10), Detail: map[string]any{"replay_job_id": j.ID}}, nil
}

// Reject has nothing to undo: nothing was created for the request.
func (bulkApprovals) Reject(context.Context, pgx.Tx, approval.Approval) (approval.Outcome, error) {
	return approval.Outcome{}, nil
}
