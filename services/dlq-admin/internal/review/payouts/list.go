package payouts

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/aegis-payments/aegis/pkg/payoutstate"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/payouts/sqlcdb"
)

// PayoutStatuses are the payout states a list may filter on (payouts.status).
func PayoutStatuses() []string {
	return payoutstate.Names(payoutstate.Status.Valid)
}

// PayoutSummary is one row of the payouts list: the payout, why it is where
// it is (its last error, its latest dead letter) and its latest operator
// resolution.
type PayoutSummary struct {
	ID           string
	UserID       string
	Amount       int64
	Currency     string
	Provider     string
	Destination  string
	Status       string
	PSPReference *string
	PSPStatus    *string
	LastError    *string
	ErrorClass   *string
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// DeadLetterID is the payout's latest dead letter, if any.
	DeadLetterID *int64
	// ResolutionID and ResolutionStatus are its latest resolution's.
	ResolutionID     *string
	ResolutionStatus *string
}

// PayoutFilter is the payouts list's query: NEEDS_REVIEW first, then
// oldest first.
type PayoutFilter struct {
	Status string
	Limit  int
	Cursor string
}

// List returns a page of payouts and the cursor of the next page ("" on
// the last). Errors: *input.Invalid for a bad status, limit or cursor.
func (r *Reader) List(ctx context.Context, f PayoutFilter) (_ []PayoutSummary, _ string, err error) {
	defer fault.Mark(&err, what)
	if f.Status != "" && !slices.Contains(PayoutStatuses(), f.Status) {
		return nil, "", &input.Invalid{Param: "status", Reason: "must be one of " + strings.Join(PayoutStatuses(), ", ")}
	}
	limit, err := input.Limit(f.Limit, input.MaxLimit)
	if err != nil {
		return nil, "", err
	}
	f.Limit = limit
	arg := sqlcdb.ListPayoutsParams{Status: f.Status, Reviewable: payoutstate.Names(payoutstate.Status.Reviewable),
		MaxRows: f.Limit + 1}
	if f.Cursor != "" {
		if arg.Rank, arg.At, arg.AfterID, err = decodePayoutCursor(f.Cursor); err != nil {
			return nil, "", &input.Invalid{Param: "cursor", Reason: "is not a cursor this list returned"}
		}
		arg.After = true
	}
	rows, err := r.q.ListPayouts(ctx, arg)
	if err != nil {
		return nil, "", fmt.Errorf("list payouts: %w", err)
	}
	items := make([]PayoutSummary, len(rows))
	for i, p := range rows {
		items[i] = PayoutSummary{ID: p.ID, UserID: p.UserID, Amount: p.Amount, Currency: p.Currency, Provider: p.Provider,
			Destination: p.Destination, Status: p.Status, PSPReference: p.PSPReference, PSPStatus: p.PspStatus,
			LastError: p.LastError, ErrorClass: p.ErrorClass, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
			DeadLetterID: orNil(p.DeadLetterID), ResolutionID: orNil(p.ResolutionID), ResolutionStatus: orNil(p.ResolutionStatus)}
	}
	next := ""
	if len(items) > f.Limit {
		items = items[:f.Limit]
		last := items[len(items)-1]
		r := 1
		if payoutstate.Status(last.Status).Reviewable() {
			r = 0
		}
		next = encodePayoutCursor(r, last.CreatedAt, last.ID)
	}
	return items, next, nil
}

func encodePayoutCursor(rank int, at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d|%s|%s", rank, at.UTC().Format(time.RFC3339Nano), id))
}

func decodePayoutCursor(c string) (int, time.Time, uuid.UUID, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, time.Time{}, uuid.Nil, err
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) != 3 || (parts[0] != "0" && parts[0] != "1") {
		return 0, time.Time{}, uuid.Nil, errors.New("malformed payout cursor")
	}
	id, err := uuid.Parse(parts[2])
	if err != nil {
		return 0, time.Time{}, uuid.Nil, err
	}
	at, err := time.Parse(time.RFC3339Nano, parts[1])
	if err != nil {
		return 0, time.Time{}, uuid.Nil, err
	}
	rank := 0
	if parts[0] == "1" {
		rank = 1
	}
	return rank, at, id, nil
}
