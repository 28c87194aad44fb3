package api

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/redact"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/recon"
)

// Payload encodings of detailView.PayloadEncoding.
const (
	encodingJSON   = "json"
	encodingBase64 = "base64"
	// encodingHidden: not JSON, so not redactable by key, and the reader
	// may not see personal data: the payload is withheld.
	encodingHidden = "hidden"
)

type listView struct {
	Items []summaryView `json:"items"`
	// NextCursor is "" on the last page.
	NextCursor string `json:"next_cursor"`
}

// summaryView is one list item: the letter without payload, headers and
// retry history. Nullable columns are null, not omitted, so every item has
// the same keys.
type summaryView struct {
	ID                int64      `json:"id"`
	Source            string     `json:"source"`
	OriginalTopic     string     `json:"original_topic"`
	OriginalPartition *int32     `json:"original_partition"`
	OriginalOffset    *int64     `json:"original_offset"`
	ConsumerGroup     string     `json:"consumer_group"`
	OutboxID          *int64     `json:"outbox_id"`
	PartitionKey      string     `json:"partition_key"`
	EventType         string     `json:"event_type"`
	Error             string     `json:"error"`
	ErrorClass        string     `json:"error_class"`
	RetryCount        int        `json:"retry_count"`
	CorrelationID     string     `json:"correlation_id"`
	Status            string     `json:"status"`
	ReplayCount       int        `json:"replay_count"`
	ReplayOutboxID    *int64     `json:"replay_outbox_id"`
	ResolvedBy        *string    `json:"resolved_by"`
	ResolvedAt        *time.Time `json:"resolved_at"`
	ResolutionReason  *string    `json:"resolution_reason"`
	FirstFailureAt    time.Time  `json:"first_failure_at"`
	FailedAt          time.Time  `json:"failed_at"`
	CreatedAt         time.Time  `json:"created_at"`
	PayloadBytes      int        `json:"payload_bytes"`
	// Subject is what the letter is about, from its payload.
	Subject subjectView `json:"subject"`
	// Replay is what its replay did; null until it is replayed.
	Replay *replayOutcomeView `json:"replay"`
}

// subjectView is the payout or PSP event a letter is about, with every key
// present (null when the payload does not say).
type subjectView struct {
	PayoutID *string `json:"payout_id"`
	Provider *string `json:"provider"`
	EventID  *string `json:"event_id"`
	// UserID is the letter's partition key (the wallet owner), else the
	// payload's user_id.
	UserID   *string `json:"user_id"`
	Amount   *int64  `json:"amount"`
	Currency *string `json:"currency"`
	// EventType is the record's event_type header, else the payload's type.
	EventType *string `json:"event_type"`
}

// replayOutcomeView says what a replay did: "republished" (outbox_id
// carries it back to its topic) or "noop" (nothing was published:
// subject_state is the payout's or event's state that made it one).
type replayOutcomeView struct {
	Outcome      string  `json:"outcome"`
	OutboxID     *int64  `json:"outbox_id"`
	SubjectState *string `json:"subject_state"`
	Message      string  `json:"message"`
}

// detailView is one letter with its redacted payload, headers and history.
type detailView struct {
	summaryView
	// PayloadEncoding says how to read Payload: "json" (the payload itself,
	// redacted) or "base64" (not JSON: {"base64": "..."}).
	PayloadEncoding string          `json:"payload_encoding"`
	Payload         json.RawMessage `json:"payload"`
	Headers         json.RawMessage `json:"headers"`
	RetryHistory    json.RawMessage `json:"retry_history"`
	// Replayable says whether a replay can put the letter back; when not,
	// NotReplayableReason says why (what a replay would answer with 422).
	Replayable          bool    `json:"replayable"`
	NotReplayableReason *string `json:"not_replayable_reason"`
	// FailedAgainAs are the letters its replay became, oldest first.
	FailedAgainAs []int64 `json:"failed_again_as"`
	// ReplayWould is what a replay would do now (open, replayable letters
	// only; null otherwise).
	ReplayWould *replayWouldView `json:"replay_would"`
}

// replayWouldView predicts a replay: outcome republished, or noop with the
// subject state that makes it one.
type replayWouldView struct {
	Outcome      string  `json:"outcome"`
	SubjectState *string `json:"subject_state"`
}

type statsView struct {
	AsOf     time.Time        `json:"as_of"`
	ByStatus map[string]int64 `json:"by_status"`
	// OldestOpenAgeSeconds is null when no letter is open.
	OldestOpenAgeSeconds *int64           `json:"oldest_open_age_seconds"`
	Topics               []topicStatsView `json:"topics"`
}

type topicStatsView struct {
	Topic                string           `json:"topic"`
	ByStatus             map[string]int64 `json:"by_status"`
	OldestOpenAgeSeconds *int64           `json:"oldest_open_age_seconds"`
}

func newSummaryView(s store.Summary) summaryView {
	return summaryView{
		ID: s.ID, Source: s.Source, OriginalTopic: s.OriginalTopic,
		OriginalPartition: s.OriginalPartition, OriginalOffset: s.OriginalOffset,
		ConsumerGroup: s.ConsumerGroup, OutboxID: s.OutboxID, PartitionKey: s.PartitionKey,
		EventType: s.EventType, Error: s.Error, ErrorClass: s.ErrorClass, RetryCount: s.RetryCount,
		CorrelationID: s.CorrelationID, Status: s.Status, ReplayCount: s.ReplayCount,
		ReplayOutboxID: s.ReplayOutboxID, ResolvedBy: s.ResolvedBy, ResolvedAt: utcPtr(s.ResolvedAt),
		ResolutionReason: s.ResolutionReason, FirstFailureAt: s.FirstFailureAt.UTC(), FailedAt: s.FailedAt.UTC(),
		CreatedAt: s.CreatedAt.UTC(), PayloadBytes: s.PayloadBytes,
		Subject: newSubjectView(s), Replay: newReplayOutcomeView(s),
	}
}

func newSubjectView(s store.Summary) subjectView {
	user := s.PartitionKey
	if user == "" {
		user = s.Subject.UserID
	}
	eventType := s.EventType
	if eventType == "" {
		eventType = s.Subject.Type
	}
	return subjectView{
		PayoutID: nonEmpty(s.Subject.PayoutID), Provider: nonEmpty(s.Subject.Provider), EventID: nonEmpty(s.Subject.EventID),
		UserID: nonEmpty(user), Amount: s.Subject.Amount, Currency: nonEmpty(s.Subject.Currency), EventType: nonEmpty(eventType),
	}
}

func nonEmpty(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

func newReplayOutcomeView(s store.Summary) *replayOutcomeView {
	if s.ReplayOutcome == nil {
		return nil
	}
	v := &replayOutcomeView{Outcome: *s.ReplayOutcome, OutboxID: s.ReplayOutboxID, SubjectState: s.ReplaySubjectState}
	state := ""
	if s.ReplaySubjectState != nil {
		state = *s.ReplaySubjectState
	}
	v.Message = outcomeMessage(s, *s.ReplayOutcome, state)
	return v
}

// outcomeMessage says in a sentence what a replay did, for people.
func outcomeMessage(s store.Summary, outcome, state string) string {
	if outcome != store.OutcomeNoop {
		return "republished to " + s.OriginalTopic + ": the consumer will process it again"
	}
	switch {
	case s.Subject.PayoutID != "":
		return "nothing published: payout " + s.Subject.PayoutID + " is already " + state + ", and a replay would not change it"
	case s.Subject.EventID != "":
		return "nothing published: event " + s.Subject.EventID + " was already applied (" + state + ")"
	default:
		return "nothing published: its subject is already " + state
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// newDetailView shows d to a reader who may see what level allows.
func newDetailView(d store.DeadLetter, level redact.Level) detailView {
	v := detailView{
		summaryView:   newSummaryView(d.Summary),
		Headers:       redactedOr(d.Headers, `{}`, level),
		RetryHistory:  redactedOr(d.RetryHistory, `[]`, level),
		Replayable:    true,
		FailedAgainAs: d.FailedAgainAs,
	}
	if v.FailedAgainAs == nil {
		v.FailedAgainAs = []int64{}
	}
	if _, err := replay.Message(d); err != nil {
		v.Replayable, v.NotReplayableReason = false, nonEmpty(err.Error())
	}
	out, err := redact.JSON(d.Payload, level)
	switch {
	case err == nil:
		v.PayloadEncoding, v.Payload = encodingJSON, out
	case level >= redact.Personal:
		// Not JSON, so nothing to redact by key, and it may be full of
		// personal data: withheld from viewers.
		v.PayloadEncoding, v.Payload = encodingHidden, json.RawMessage(`{"hidden":"not JSON: shown to operators only"}`)
	default:
		// encoding/json cannot fail on a map of strings.
		b, _ := json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(d.Payload)})
		v.PayloadEncoding, v.Payload = encodingBase64, b
	}
	return v
}

// redactedOr redacts a stored JSON column; a column that does not parse (it
// is jsonb, so it always should) is shown as empty rather than unredacted.
func redactedOr(doc []byte, empty string, level redact.Level) json.RawMessage {
	out, err := redact.JSON(doc, level)
	if err != nil {
		return json.RawMessage(empty)
	}
	return out
}

func newStatsView(st store.Stats) statsView {
	v := statsView{
		AsOf:                 st.AsOf.UTC(),
		ByStatus:             st.ByStatus,
		OldestOpenAgeSeconds: seconds(st.OldestOpenAge),
		Topics:               make([]topicStatsView, 0, len(st.Topics)),
	}
	for _, t := range st.Topics {
		v.Topics = append(v.Topics, topicStatsView{Topic: t.Topic, ByStatus: t.ByStatus, OldestOpenAgeSeconds: seconds(t.OldestOpenAge)})
	}
	return v
}

// seconds is a whole number of seconds, rounded down.
func seconds(d *time.Duration) *int64 {
	if d == nil {
		return nil
	}
	s := int64(*d / time.Second)
	return &s
}

// replayedView answers a replay: what it did (outcome "republished" or
// "noop"), the outbox row that carries a republished letter back (null for
// a no-op), the subject state that made it a no-op, and the letter's new
// state.
type replayedView struct {
	Outcome      string      `json:"outcome"`
	OutboxID     *int64      `json:"outbox_id"`
	SubjectState *string     `json:"subject_state"`
	Message      string      `json:"message"`
	DeadLetter   summaryView `json:"dead_letter"`
}

func newReplayedView(r replay.Replayed) replayedView {
	v := replayedView{Outcome: r.Outcome, SubjectState: nonEmpty(r.SubjectState), DeadLetter: newSummaryView(r.Letter),
		Message: outcomeMessage(r.Letter, r.Outcome, r.SubjectState)}
	if r.OutboxID != 0 {
		v.OutboxID = &r.OutboxID
	}
	return v
}

type discardedView struct {
	DeadLetter summaryView `json:"dead_letter"`
}

// previewView answers a dry run.
type previewView struct {
	DryRun      bool    `json:"dry_run"`
	Matched     int64   `json:"matched"`
	WouldReplay int64   `json:"would_replay"`
	IDs         []int64 `json:"ids"`
}

func newPreviewView(p replay.Preview) previewView {
	ids := p.IDs
	if ids == nil {
		ids = []int64{}
	}
	return previewView{DryRun: true, Matched: p.Matched, WouldReplay: p.WouldReplay, IDs: ids}
}

type jobView struct {
	ID         int64            `json:"id"`
	Actor      string           `json:"actor"`
	Reason     *string          `json:"reason"`
	Filter     replay.JobFilter `json:"filter"`
	Max        int              `json:"max"`
	Status     string           `json:"status"`
	Matched    int              `json:"matched"`
	Replayed   int              `json:"replayed"`
	Noop       int              `json:"noop"`
	Skipped    int              `json:"skipped"`
	Failed     int              `json:"failed"`
	LastError  *string          `json:"last_error"`
	UptoID     int64            `json:"upto_id"`
	CursorID   int64            `json:"cursor_id"`
	CreatedAt  time.Time        `json:"created_at"`
	StartedAt  *time.Time       `json:"started_at"`
	FinishedAt *time.Time       `json:"finished_at"`
}

type jobListView struct {
	Items []jobView `json:"items"`
}

func newJobView(j replay.Job) jobView {
	var reason *string
	if j.Reason != "" {
		reason = &j.Reason
	}
	return jobView{
		ID: j.ID, Actor: j.Actor, Reason: reason, Filter: j.Filter, Max: j.Max, Status: j.Status,
		Matched: j.Matched, Replayed: j.Replayed, Noop: j.Noop, Skipped: j.Skipped, Failed: j.Failed, LastError: j.LastError,
		UptoID: j.UptoID, CursorID: j.CursorID, CreatedAt: j.CreatedAt.UTC(), StartedAt: utcPtr(j.StartedAt),
		FinishedAt: utcPtr(j.FinishedAt),
	}
}

type runView struct {
	ID         int64         `json:"id"`
	StartedAt  time.Time     `json:"started_at"`
	FinishedAt time.Time     `json:"finished_at"`
	OK         bool          `json:"ok"`
	Trigger    string        `json:"trigger"`
	Actor      *string       `json:"actor"`
	Summary    recon.Summary `json:"summary"`
}

func newRunView(r recon.Run) runView {
	return runView{ID: r.ID, StartedAt: r.StartedAt.UTC(), FinishedAt: r.FinishedAt.UTC(), OK: r.OK,
		Trigger: r.Trigger, Actor: r.Actor, Summary: r.Summary}
}

type groupListView struct {
	Items []groupView `json:"items"`
}

// groupView is the letters sharing an error class and normalised message.
type groupView struct {
	ErrorClass  string    `json:"error_class"`
	Message     string    `json:"message"`
	Count       int64     `json:"count"`
	OldestAt    time.Time `json:"oldest_failed_at"`
	NewestAt    time.Time `json:"newest_failed_at"`
	SampleID    int64     `json:"sample_id"`
	SampleError string    `json:"sample_error"`
	Topics      []string  `json:"topics"`
}

func newGroupView(g store.Group) groupView {
	topics := g.Topics
	if topics == nil {
		topics = []string{}
	}
	return groupView{ErrorClass: g.ErrorClass, Message: g.Message, Count: g.Count, OldestAt: g.Oldest.UTC(),
		NewestAt: g.Newest.UTC(), SampleID: g.SampleID, SampleError: g.SampleError, Topics: topics}
}

// bulkDiscardedView answers a bulk discard or its dry run.
type bulkDiscardedView struct {
	DryRun  bool  `json:"dry_run"`
	Matched int64 `json:"matched"`
	// Discarded is how many were (a dry run: would be) discarded.
	Discarded int64   `json:"discarded"`
	IDs       []int64 `json:"ids"`
}

// jobLettersView is what a bulk replay did with each letter it reached, in
// letter id order; the next page is ?after=<last dead_letter_id>.
type jobLettersView struct {
	Items []jobLetterView `json:"items"`
}

type jobLetterView struct {
	DeadLetterID int64 `json:"dead_letter_id"`
	// Outcome is republished, noop, not_replayable or skipped.
	Outcome      string    `json:"outcome"`
	OutboxID     *int64    `json:"outbox_id"`
	SubjectState *string   `json:"subject_state"`
	Error        *string   `json:"error"`
	At           time.Time `json:"at"`
}

func nonZeroID(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}
