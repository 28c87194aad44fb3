package api

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/recon"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/redact"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/store"
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
		summaryView:  newSummaryView(d.Summary),
		Headers:      redactedOr(d.Headers, `{}`, level),
		RetryHistory: redactedOr(d.RetryHistory, `[]`, level),
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

// replayedView answers a replay: the letter's new state and the outbox row
// that carries it back.
type replayedView struct {
	OutboxID   int64       `json:"outbox_id"`
	DeadLetter summaryView `json:"dead_letter"`
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
		Matched: j.Matched, Replayed: j.Replayed, Skipped: j.Skipped, Failed: j.Failed, LastError: j.LastError,
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
