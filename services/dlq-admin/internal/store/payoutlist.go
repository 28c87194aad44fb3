package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
)

// PayoutStatuses are the payout states a list may filter on (payouts.status).
func PayoutStatuses() []string {
	return []string{"INITIALIZED", "SENDING_TO_GATEWAY", "SENT_TO_GATEWAY", "AWAITING_RESPONSE", "SUCCEEDED",
		"RETRYING", "FAILED", "NEEDS_REVIEW", "FINALIZED"}
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

const sqlListPayouts = `
SELECT p.id::text, p.user_id, p.amount, p.currency, p.provider, p.destination, p.status, p.psp_reference,
       p.psp_status, p.last_error, p.error_class, p.created_at, p.updated_at,
       (SELECT d.id FROM dead_letters d WHERE d.subject ? 'payout_id' AND d.subject->>'payout_id' = p.id::text
        ORDER BY d.id DESC LIMIT 1),
       r.id::text, r.status
FROM payouts p
LEFT JOIN LATERAL (SELECT id, status FROM payout_resolutions WHERE payout_id = p.id
                   ORDER BY created_at DESC LIMIT 1) r ON true
WHERE ($1 = '' OR p.status = $1)
  AND (NOT $2 OR (CASE WHEN p.status = 'NEEDS_REVIEW' THEN 0 ELSE 1 END, p.created_at, p.id) > ($3, $4, $5::uuid))
ORDER BY CASE WHEN p.status = 'NEEDS_REVIEW' THEN 0 ELSE 1 END, p.created_at, p.id
LIMIT $6`

// ListPayouts returns a page of payouts and the cursor of the next page
// ("" on the last). Errors: *input.Invalid for a bad status, limit or cursor.
func (s *Store) ListPayouts(ctx context.Context, f PayoutFilter) ([]PayoutSummary, string, error) {
	if f.Status != "" && !slices.Contains(PayoutStatuses(), f.Status) {
		return nil, "", &input.Invalid{Param: "status", Reason: "must be one of " + strings.Join(PayoutStatuses(), ", ")}
	}
	limit, err := input.Limit(f.Limit, input.MaxLimit)
	if err != nil {
		return nil, "", err
	}
	f.Limit = limit
	var after bool
	var rank int
	var at time.Time
	id := "00000000-0000-0000-0000-000000000000"
	if f.Cursor != "" {
		var err error
		if rank, at, id, err = decodePayoutCursor(f.Cursor); err != nil {
			return nil, "", &input.Invalid{Param: "cursor", Reason: "is not a cursor this list returned"}
		}
		after = true
	}
	rows, err := s.pool.Query(ctx, sqlListPayouts, f.Status, after, rank, at, id, f.Limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list payouts: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PayoutSummary, error) {
		var p PayoutSummary
		return p, r.Scan(&p.ID, &p.UserID, &p.Amount, &p.Currency, &p.Provider, &p.Destination, &p.Status,
			&p.PSPReference, &p.PSPStatus, &p.LastError, &p.ErrorClass, &p.CreatedAt, &p.UpdatedAt, &p.DeadLetterID,
			&p.ResolutionID, &p.ResolutionStatus)
	})
	if err != nil {
		return nil, "", fmt.Errorf("list payouts: %w", err)
	}
	next := ""
	if len(items) > f.Limit {
		items = items[:f.Limit]
		last := items[len(items)-1]
		r := 1
		if last.Status == "NEEDS_REVIEW" {
			r = 0
		}
		next = encodePayoutCursor(r, last.CreatedAt, last.ID)
	}
	return items, next, nil
}

func encodePayoutCursor(rank int, at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d|%s|%s", rank, at.UTC().Format(time.RFC3339Nano), id))
}

func decodePayoutCursor(c string) (int, time.Time, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, time.Time{}, "", err
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) != 3 || (parts[0] != "0" && parts[0] != "1") {
		return 0, time.Time{}, "", errors.New("malformed payout cursor")
	}
	if _, err := uuid.Parse(parts[2]); err != nil {
		return 0, time.Time{}, "", err
	}
	at, err := time.Parse(time.RFC3339Nano, parts[1])
	if err != nil {
		return 0, time.Time{}, "", err
	}
	rank := 0
	if parts[0] == "1" {
		rank = 1
	}
	return rank, at, parts[2], nil
}
