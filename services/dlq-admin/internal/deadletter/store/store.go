package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
)

// what is the part of dlq-admin this package's errors are marked with.
const what = "the dead-letter store"

// ErrNotFound is returned when no dead letter has the requested id.
var ErrNotFound = errors.New("dead letter not found")

// Summary is a dead letter without its payload, headers and retry history:
// what a list shows.
type Summary struct {
	ID                int64
	Source            string
	OriginalTopic     string
	OriginalPartition *int32
	OriginalOffset    *int64
	ConsumerGroup     string
	OutboxID          *int64
	PartitionKey      string
	EventType         string
	Error             string
	ErrorClass        string
	RetryCount        int
	FirstFailureAt    time.Time
	FailedAt          time.Time
	CorrelationID     string
	Status            string
	ReplayCount       int
	ReplayOutboxID    *int64
	ResolvedBy        *string
	ResolvedAt        *time.Time
	ResolutionReason  *string
	CreatedAt         time.Time
	PayloadBytes      int
	// Subject is what the letter is about, read from its payload when it
	// was stored (migration 000009).
	Subject Subject
	// ReplayOutcome is OutcomeRepublished or OutcomeNoop once replayed.
	ReplayOutcome *string
	// ReplaySubjectState is the payout's state (or the event's) that made a
	// replay a no-op.
	ReplaySubjectState *string
}

// Subject is the payout or PSP event a letter is about, as its payload
// names it. Fields the payload does not have are empty.
type Subject struct {
	PayoutID string `json:"payout_id,omitempty"`
	// Provider and EventID identify a PSP event (webhook_events).
	Provider string `json:"provider,omitempty"`
	EventID  string `json:"event_id,omitempty"`
	UserID   string `json:"user_id,omitempty"`
	// Amount is in minor units; nil when the payload has no numeric amount.
	Amount   *int64 `json:"amount,omitempty"`
	Currency string `json:"currency,omitempty"`
	// Type is a PSP event's own type (the payload's "type").
	Type string `json:"type,omitempty"`
}

// DeadLetter is one stored dead letter, exactly as stored: nothing is
// redacted here, because replay needs the original.
type DeadLetter struct {
	Summary
	Payload []byte
	// Headers is the stored JSON object of the original record's headers.
	Headers json.RawMessage
	// RetryHistory is the stored JSON array of attempts (pkg/dlq.Attempt).
	RetryHistory json.RawMessage
	// FailedAgainAs are the letters a replay of this one became, oldest
	// first (Get only).
	FailedAgainAs []int64
}

// Group is the open letters (or those of a filter) sharing an error class
// and normalised error message.
type Group struct {
	ErrorClass string
	// Message is the error with ids and numbers replaced by <id> and <n>.
	Message string
	Count   int64
	Oldest  time.Time
	Newest  time.Time
	// SampleID is the group's newest letter, SampleError its error as is.
	SampleID    int64
	SampleError string
	Topics      []string
}

// Stats is the depth of the dead-letter store at one moment.
type Stats struct {
	AsOf time.Time
	// ByStatus counts every letter by status; every status is present.
	ByStatus map[string]int64
	// OldestOpenAge is how long the oldest open letter has waited since it
	// failed; nil when nothing is open.
	OldestOpenAge *time.Duration
	// Topics are per original topic, sorted by name.
	Topics []TopicStats
}

// TopicStats is the depth of one original topic.
type TopicStats struct {
	Topic         string
	ByStatus      map[string]int64
	OldestOpenAge *time.Duration
}

// Store reads dead letters.
type Store struct {
	pool *pgxpool.Pool
	q    *sqlcdb.Queries
	// filtered runs the statements with a filters template (queries.sql).
	filtered *sqlcdb.Queries
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, q: sqlcdb.New(pool), filtered: sqlcdb.New(database.NewTemplated(pool))}
}

// List returns the page of letters matching f, newest (highest id) first,
// and the cursor of the next page ("" when this page is the last).
func (s *Store) List(ctx context.Context, f Filter) (_ []Summary, _ string, err error) {
	defer fault.Mark(&err, what)
	if err := f.Validate(); err != nil {
		return nil, "", err
	}
	below, _ := decodeCursor(f.Cursor) // validated above
	limit := f.limit()
	// One row more than asked tells whether another page exists without a
	// second query.
	rows, err := s.filtered.List(f.filters().in(ctx), sqlcdb.ListParams{Below: below, MaxRows: limit + 1})
	if err != nil {
		return nil, "", fmt.Errorf("list dead letters: %w", err)
	}
	items, err := summaries(rows, listRow)
	if err != nil {
		return nil, "", fmt.Errorf("list dead letters: %w", err)
	}
	next := ""
	if len(items) > limit {
		items = items[:limit]
		next = encodeCursor(items[limit-1].ID)
	}
	return items, next, nil
}

// Get returns the letter with id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (_ DeadLetter, err error) {
	defer fault.Mark(&err, what)
	row, err := s.q.Get(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return DeadLetter{}, ErrNotFound
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("get dead letter %d: %w", id, err)
	}
	d, err := letter(sqlcdb.ListRow(row))
	if err != nil {
		return DeadLetter{}, fmt.Errorf("get dead letter %d: %w", id, err)
	}
	if d.Status != StatusReplayed {
		return d, nil
	}
	if d.FailedAgainAs, err = s.q.FailedAgain(ctx, id); err != nil {
		return DeadLetter{}, fmt.Errorf("get dead letter %d: letters its replay became: %w", id, err)
	}
	return d, nil
}

// MaxGroups is the most groups Groups returns.
const MaxGroups = 200

// Groups groups the letters matching m by error class and normalised error
// message, biggest first, at most MaxGroups.
func (s *Store) Groups(ctx context.Context, m Match) (_ []Group, err error) {
	defer fault.Mark(&err, what)
	if err := m.Validate(); err != nil {
		return nil, err
	}
	rows, err := s.filtered.Groups(m.filters().in(ctx), MaxGroups)
	if err != nil {
		return nil, fmt.Errorf("group dead letters: %w", err)
	}
	groups := make([]Group, len(rows))
	for i, g := range rows {
		groups[i] = Group(g)
	}
	return groups, nil
}

// Stats counts letters by original topic and status and measures the age of
// the oldest open letter, overall and per topic, at now.
func (s *Store) Stats(ctx context.Context, now time.Time) (_ Stats, err error) {
	defer fault.Mark(&err, what)
	groups, err := s.q.Stats(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("dead-letter stats: %w", err)
	}

	st := Stats{AsOf: now, ByStatus: zeroCounts()}
	byTopic := map[string]*TopicStats{}
	var oldestOpen time.Time
	for _, g := range groups {
		ts, ok := byTopic[g.OriginalTopic]
		if !ok {
			ts = &TopicStats{Topic: g.OriginalTopic, ByStatus: zeroCounts()}
			byTopic[g.OriginalTopic] = ts
		}
		ts.ByStatus[g.Status] += g.Count
		st.ByStatus[g.Status] += g.Count
		if g.Status != StatusOpen {
			continue
		}
		ts.OldestOpenAge = age(now, g.Oldest)
		if oldestOpen.IsZero() || g.Oldest.Before(oldestOpen) {
			oldestOpen = g.Oldest
		}
	}
	if !oldestOpen.IsZero() {
		st.OldestOpenAge = age(now, oldestOpen)
	}
	for _, ts := range byTopic {
		st.Topics = append(st.Topics, *ts)
	}
	sort.Slice(st.Topics, func(i, j int) bool { return st.Topics[i].Topic < st.Topics[j].Topic })
	return st, nil
}

// ClassCount is the number of open letters of one original topic and
// error class.
type ClassCount struct {
	Topic, Class string
	Open         int64
}

// OpenByClass counts the open letters per original topic and error class.
func (s *Store) OpenByClass(ctx context.Context) (_ []ClassCount, err error) {
	defer fault.Mark(&err, what)
	rows, err := s.q.OpenByClass(ctx)
	if err != nil {
		return nil, fmt.Errorf("open dead letters by class: %w", err)
	}
	out := make([]ClassCount, 0, len(rows))
	for _, r := range rows {
		out = append(out, ClassCount{Topic: r.OriginalTopic, Class: r.ErrorClass, Open: r.Count})
	}
	return out, nil
}

// letter is a row of any statement returning letters (List's row: the
// others are converted to it).
func letter(r sqlcdb.ListRow) (DeadLetter, error) {
	d := DeadLetter{
		Summary: Summary{
			ID: r.ID, Source: r.Source, OriginalTopic: r.OriginalTopic, OriginalPartition: r.OriginalPartition,
			OriginalOffset: r.OriginalOffset, ConsumerGroup: r.ConsumerGroup, OutboxID: r.OutboxID,
			PartitionKey: r.PartitionKey, EventType: r.EventType, Error: r.Error, ErrorClass: r.ErrorClass,
			RetryCount: r.RetryCount, FirstFailureAt: r.FirstFailureAt, FailedAt: r.FailedAt,
			CorrelationID: r.CorrelationID, Status: r.Status, ReplayCount: r.ReplayCount,
			ReplayOutboxID: r.ReplayOutboxID, ResolvedBy: r.ResolvedBy, ResolvedAt: r.ResolvedAt,
			ResolutionReason: r.ResolutionReason, CreatedAt: r.CreatedAt, PayloadBytes: r.PayloadBytes,
			ReplayOutcome: r.ReplayOutcome, ReplaySubjectState: r.ReplaySubjectState,
		},
		Payload: r.Payload, Headers: r.Headers, RetryHistory: r.RetryHistory,
	}
	if err := json.Unmarshal(r.Subject, &d.Subject); err != nil {
		return DeadLetter{}, fmt.Errorf("dead letter %d: read its subject: %w", r.ID, err)
	}
	return d, nil
}

// summaries are the summaries of rows, each converted to List's row by
// asList.
func summaries[R any](rows []R, asList func(R) sqlcdb.ListRow) ([]Summary, error) {
	out := make([]Summary, len(rows))
	for i, r := range rows {
		d, err := letter(asList(r))
		if err != nil {
			return nil, err
		}
		out[i] = d.Summary
	}
	return out, nil
}

func listRow(r sqlcdb.ListRow) sqlcdb.ListRow { return r }

func zeroCounts() map[string]int64 {
	m := make(map[string]int64, 3)
	for _, s := range Statuses() {
		m[s] = 0
	}
	return m
}

// age is now - since, never negative: a producer's clock ahead of ours must
// not show a letter as failing in the future.
func age(now, since time.Time) *time.Duration {
	d := max(now.Sub(since), 0)
	return &d
}
