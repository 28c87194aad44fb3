package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay/sqlcdb"
)

// resolutionState is noopState for a payout.resolution command (package
// resolution): a replay changes nothing once its resolution was decided
// (the worker applies each resolution once), and says so as
// RESOLUTION_APPLIED, _REFUSED or _REJECTED. ok is false when the payload
// is not a resolution command.
func resolutionState(ctx context.Context, q *sqlcdb.Queries, payload []byte) (state string, ok bool, err error) {
	var cmd event.PayoutResolution
	if json.Unmarshal(payload, &cmd) != nil || cmd.ResolutionID == "" {
		return "", false, nil
	}
	id, err := uuid.Parse(cmd.ResolutionID)
	if err != nil {
		return "", true, nil
	}
	status, err := q.ResolutionDecided(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", true, nil
	}
	if err != nil {
		return "", true, fmt.Errorf("look up resolution %s: %w", id, err)
	}
	switch status {
	case "applied", "refused", "rejected":
		return "RESOLUTION_" + strings.ToUpper(status), true, nil
	}
	return "", true, nil
}
