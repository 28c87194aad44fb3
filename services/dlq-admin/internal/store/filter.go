package store

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Statuses of a dead letter (the dead_letters.status check constraint).
const (
	StatusOpen      = "open"
	StatusReplayed  = "replayed"
	StatusDiscarded = "discarded"
)

// Statuses lists every status, in the order stats report them.
func Statuses() []string { return []string{StatusOpen, StatusReplayed, StatusDiscarded} }

// Page sizes.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// Filter selects dead letters. Zero values mean "any". It is the filter of
// the list endpoint and, later, of bulk replay.
type Filter struct {
	// Topic is the original topic (aegis.transactions, not its .dlq).
	Topic      string
	Status     string
	ErrorClass string
	// Since and Until bound failed_at: Since <= failed_at < Until.
	Since time.Time
	Until time.Time
	// Limit is the page size: DefaultLimit when 0, at most MaxLimit.
	Limit int
	// Cursor is the previous page's next cursor, "" for the first page.
	Cursor string
}

// InvalidError is a filter value the store cannot use. Param is the name of
// the filter (topic, status, error_class, since, until, limit, cursor) as the
// API spells it, so callers can say which one was wrong.
type InvalidError struct {
	Param  string
	Reason string
}

func (e *InvalidError) Error() string { return e.Param + ": " + e.Reason }

// Validate checks f and returns an *InvalidError naming the first bad value.
func (f Filter) Validate() error {
	switch f.Status {
	case "", StatusOpen, StatusReplayed, StatusDiscarded:
	default:
		return &InvalidError{Param: "status", Reason: "must be one of open, replayed, discarded"}
	}
	if f.Limit < 0 || f.Limit > MaxLimit {
		return &InvalidError{Param: "limit", Reason: fmt.Sprintf("must be between 1 and %d", MaxLimit)}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return &InvalidError{Param: "until", Reason: "must be after since"}
	}
	if _, err := decodeCursor(f.Cursor); err != nil {
		return err
	}
	return nil
}

func (f Filter) limit() int {
	if f.Limit == 0 {
		return DefaultLimit
	}
	return f.Limit
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
	bad := &InvalidError{Param: "cursor", Reason: "is not a cursor returned by this API"}
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
