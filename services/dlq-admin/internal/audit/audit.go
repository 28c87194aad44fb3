package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
)

// Entry is one row of audit_log: an operator action.
type Entry struct {
	Actor      string
	Action     string
	TargetType string
	TargetID   string
	Reason     string
	Detail     map[string]any
	At         time.Time
}

// Write writes e to audit_log within tx, so the record commits with the
// action it describes.
func Write(ctx context.Context, tx pgx.Tx, e Entry) (err error) {
	defer fault.Mark(&err, "the audit log")
	detail := e.Detail
	if detail == nil {
		detail = map[string]any{}
	}
	b, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encode audit detail: %w", err)
	}
	err = sqlcdb.New(tx).InsertAudit(ctx, sqlcdb.InsertAuditParams{Actor: e.Actor, Action: e.Action, TargetType: e.TargetType,
		TargetID: e.TargetID, Reason: e.Reason, Detail: b, At: e.At})
	if err != nil {
		return fmt.Errorf("write audit log (%s %s %s): %w", e.Action, e.TargetType, e.TargetID, err)
	}
	return nil
}

// ID formats a row id for audit_log.target_id.
func ID(id int64) string { return strconv.FormatInt(id, 10) }
