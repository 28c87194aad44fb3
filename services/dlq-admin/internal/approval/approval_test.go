package approval_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
)

// kind is one of the kinds the approvals table admits; the gate itself
// does not care which.
const kind = "bulk_replay"

// owner records what the gate asked of it, and writes a row in the
// decision's transaction so the test can see that it commits (or not)
// with the decision.
type owner struct {
	applied, rejected []int64
	fail              error
	after             int
}

func (o *owner) Apply(ctx context.Context, tx pgx.Tx, a approval.Approval, approver string) (approval.Outcome, error) {
	if o.fail != nil {
		return approval.Outcome{}, o.fail
	}
	if _, err := tx.Exec(ctx, `INSERT INTO audit_log (actor, action, target_type, target_id, detail, at)
		VALUES ($1, 'owner_applied', 'test', $2, '{}', now())`, approver, a.TargetID); err != nil {
		return approval.Outcome{}, err
	}
	o.applied = append(o.applied, a.ID)
	return approval.Outcome{ResultID: "result-of-" + a.TargetID, Detail: map[string]any{"applied": true},
		AfterCommit: func() { o.after++ }}, nil
}

func (o *owner) Reject(_ context.Context, _ pgx.Tx, a approval.Approval) (approval.Outcome, error) {
	o.rejected = append(o.rejected, a.ID)
	return approval.Outcome{}, nil
}

func hold(t *testing.T, db *pgtest.DB, g *approval.Gate, actor, target string) approval.Approval {
	t.Helper()
	var a approval.Approval
	require.NoError(t, database.InTx(t.Context(), db.Pool, func(tx pgx.Tx) error {
		var err error
		a, err = g.Hold(t.Context(), tx, actor, approval.Request{Kind: kind, TargetID: target, Summary: "do " + target})
		return err
	}))
	return a
}

func count(t *testing.T, db *pgtest.DB, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(t.Context(), q, args...).Scan(&n))
	return n
}

// The gate hands an approved request to the owner of its kind, in the
// transaction that records the decision; a second person must approve,
// and an owner's failure leaves the request pending with nothing written.
func TestGateHandsTheDecisionToTheOwnerOfItsKind(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	o := &owner{}
	g := approval.New(db.Pool, true, lifecycle.Deps{}).Register(kind, o)
	require.True(t, g.Required())

	a := hold(t, db, g, "ana", "t1")
	require.Equal(t, approval.StatusPending, a.Status)
	_, err := g.Approve(t.Context(), a.ID, "ana", "")
	require.ErrorIs(t, err, approval.ErrSameOperator)

	o.fail = errors.New("the owner cannot apply it")
	_, err = g.Approve(t.Context(), a.ID, "bob", "")
	require.ErrorIs(t, err, o.fail)
	got, err := g.Approval(t.Context(), a.ID)
	require.NoError(t, err)
	require.Equal(t, approval.StatusPending, got.Status, "the owner failed: nothing is decided")

	o.fail = nil
	got, err = g.Approve(t.Context(), a.ID, "bob", "checked")
	require.NoError(t, err)
	require.Equal(t, approval.StatusApproved, got.Status)
	require.Equal(t, "result-of-t1", *got.ResultID)
	require.Equal(t, []int64{a.ID}, o.applied)
	require.Equal(t, 1, o.after, "AfterCommit runs once the decision committed")
	require.Equal(t, 1, count(t, db, `SELECT count(*) FROM audit_log WHERE action = 'owner_applied' AND target_id = 't1'`))
	require.Equal(t, 1, count(t, db, `SELECT count(*) FROM audit_log WHERE action = 'approve' AND target_id = $1
		AND detail->>'applied' = 'true' AND detail->>'kind' = $2`, audit.ID(a.ID), kind))

	_, err = g.Approve(t.Context(), a.ID, "carl", "")
	require.ErrorIs(t, err, approval.ErrDecided, "decided once")

	b := hold(t, db, g, "ana", "t2")
	_, err = g.Reject(t.Context(), b.ID, "bob", " ")
	var invalid *input.Invalid
	require.ErrorAs(t, err, &invalid, "a rejection needs a reason")
	require.Equal(t, "reason", invalid.Param)
	got, err = g.Reject(t.Context(), b.ID, "bob", "asks for the wrong letters")
	require.NoError(t, err)
	require.Equal(t, approval.StatusRejected, got.Status)
	require.Equal(t, []int64{b.ID}, o.rejected)
}

// The requester may withdraw their own request (a rejection by the same
// person), though never approve it.
func TestRequesterMayWithdrawTheirOwnRequest(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	o := &owner{}
	g := approval.New(db.Pool, true, lifecycle.Deps{}).Register(kind, o)
	a := hold(t, db, g, "ana", "t1")
	got, err := g.Reject(t.Context(), a.ID, "ana", "asked for the wrong letters")
	require.NoError(t, err)
	require.Equal(t, approval.StatusRejected, got.Status)
	require.Equal(t, "ana", *got.DecidedBy)
	require.Equal(t, []int64{a.ID}, o.rejected)
	require.Empty(t, o.applied)
	require.Equal(t, 1, count(t, db, `SELECT count(*) FROM audit_log WHERE action = 'reject' AND target_id = $1`, audit.ID(a.ID)))

	// Persons cleared, so only the same-token rule can refuse it.
	_, err = db.Pool.Exec(t.Context(), `UPDATE approvals SET status = 'approved', requested_person = NULL,
		decided_person = NULL WHERE id = $1`, a.ID)
	require.ErrorContains(t, err, `"approvals_second_person"`, "the table still refuses an approval by the requester")
}

// A kind nobody registered cannot be held.
func TestGateRefusesAKindWithoutOwner(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	g := approval.New(db.Pool, true, lifecycle.Deps{})
	err := database.InTx(t.Context(), db.Pool, func(tx pgx.Tx) error {
		_, err := g.Hold(t.Context(), tx, "ana", approval.Request{Kind: kind, Summary: "x"})
		return err
	})
	require.ErrorContains(t, err, "no owner")
	require.Zero(t, count(t, db, `SELECT count(*) FROM approvals`))
}
