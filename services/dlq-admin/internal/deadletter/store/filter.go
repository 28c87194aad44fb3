package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
)

// Statuses of a dead letter, as the store's queries and JSON carry them:
// the words are pkg/dlq's (dlq.Statuses, tested against the schema).
const (
	StatusOpen      = string(dlq.StatusOpen)
	StatusReplayed  = string(dlq.StatusReplayed)
	StatusDiscarded = string(dlq.StatusDiscarded)
)

// Statuses lists every status, in the order stats report them.
func Statuses() []string {
	out := make([]string, 0, len(dlq.Statuses()))
	for _, s := range dlq.Statuses() {
		out = append(out, string(s))
	}
	return out
}

// Match selects dead letters: the filters of the list, the groups and the
// bulk actions. Zero values mean "any".
type Match struct {
	// Topic is the original topic (aegis.transactions, not its .dlq).
	Topic      string
	Status     string
	ErrorClass string
	// Since and Until bound failed_at: Since <= failed_at < Until.
	Since time.Time
	Until time.Time
	// PayoutID is the payout the letter is about (its payload's payout_id).
	PayoutID string
	// User is the letter's partition key: the wallet owner's user id.
	User          string
	CorrelationID string
	// EventType is the record's event_type header as stored (a PSP's own
	// event type on aegis.webhook.pending, payout.requested, ...).
	EventType string
}

// Filter is a Match and a page of it: the list endpoint's query.
type Filter struct {
	Match
	// Limit is the page size: input.DefaultLimit when 0, at most input.MaxLimit.
	Limit int
	// Cursor is the previous page's next cursor, "" for the first page.
	Cursor string
}

// MaxFilterValue bounds a text filter: every value is an equality, and
// nothing longer is worth an index lookup.
const MaxFilterValue = 500

// Validate checks m and returns an *input.Invalid naming the first bad value.
func (m Match) Validate() error {
	switch m.Status {
	case "", StatusOpen, StatusReplayed, StatusDiscarded:
	default:
		return &input.Invalid{Param: "status", Reason: "must be one of open, replayed, discarded"}
	}
	if !m.Since.IsZero() && !m.Until.IsZero() && !m.Since.Before(m.Until) {
		return &input.Invalid{Param: "until", Reason: "must be after since"}
	}
	for _, v := range []struct{ param, value string }{
		{"topic", m.Topic}, {"error_class", m.ErrorClass}, {"payout_id", m.PayoutID}, {"user", m.User},
		{"correlation_id", m.CorrelationID}, {"event_type", m.EventType},
	} {
		if len(v.value) > MaxFilterValue {
			return &input.Invalid{Param: v.param, Reason: fmt.Sprintf("must be at most %d characters", MaxFilterValue)}
		}
		if err := input.Text(v.param, v.value); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks f and returns an *input.Invalid naming the first bad value.
func (f Filter) Validate() error {
	if err := f.Match.Validate(); err != nil {
		return err
	}
	if _, err := input.Limit(f.Limit, input.MaxLimit); err != nil {
		return err
	}
	if _, err := decodeCursor(f.Cursor); err != nil {
		return err
	}
	return nil
}

func (f Filter) limit() int {
	n, _ := input.Limit(f.Limit, input.MaxLimit) // checked by Validate
	return n
}

// encodeCursor makes the cursor that continues after the row with id lastID.
func encodeCursor(lastID int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(lastID, 10)))
}

// decodeCursor returns the id a page must stay below; MaxInt64 for "".
func decodeCursor(c string) (int64, error) {
	if c == "" {
		return math.MaxInt64, nil
	}
	bad := &input.Invalid{Param: "cursor", Reason: "is not a cursor returned by this API"}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, bad
	}
	id, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || id < 1 {
		return 0, bad
	}
	return id, nil
}

// filters are the conditions of a filtered statement (queries.sql says
// which): each a constant of this file whose values are @named parameters,
// so that nothing a request sends becomes SQL text. No parameter name may
// begin another's (sqlctemplate replaces @name as text).
type filters struct {
	conds []string
	args  map[string]any
}

func (f *filters) add(cond, name string, v any) {
	if f.args == nil {
		f.args = map[string]any{}
	}
	f.conds = append(f.conds, cond)
	f.args[name] = v
}

// in returns ctx carrying the conditions as the statement's filters
// template ("true" when there are none).
func (f *filters) in(ctx context.Context) context.Context {
	text := "true"
	if len(f.conds) > 0 {
		text = strings.Join(f.conds, " AND ")
	}
	return database.WithTemplate(ctx, "filters", text, f.args)
}

// filters returns m's conditions.
func (m Match) filters() *filters {
	var f filters
	if m.Topic != "" {
		f.add("original_topic = @topic", "topic", m.Topic)
	}
	if m.Status != "" {
		f.add("status = @status", "status", m.Status)
	}
	if m.ErrorClass != "" {
		f.add("error_class = @error_class", "error_class", m.ErrorClass)
	}
	if !m.Since.IsZero() {
		f.add("failed_at >= @since", "since", m.Since)
	}
	if !m.Until.IsZero() {
		f.add("failed_at < @until", "until", m.Until)
	}
	if m.PayoutID != "" {
		// The first condition is dead_letters_payout_idx's predicate.
		f.add("subject ? 'payout_id' AND subject->>'payout_id' = @payout_id", "payout_id", m.PayoutID)
	}
	if m.User != "" {
		f.add("partition_key = @user", "user", m.User)
	}
	if m.CorrelationID != "" {
		f.add("correlation_id = @correlation_id", "correlation_id", m.CorrelationID)
	}
	if m.EventType != "" {
		f.add("event_type = @event_type", "event_type", m.EventType)
	}
	return &f
}
