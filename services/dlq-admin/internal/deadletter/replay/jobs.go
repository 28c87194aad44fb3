package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
)

// Job statuses (the replay_jobs.status check constraint).
const (
	JobQueued    = "queued"
	JobRunning   = "running"
	JobDone      = "done"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
)

// Bulk replay limits.
const (
	// MaxBulk caps BulkRequest.Max: a bigger replay is several jobs, each
	// one a decision someone took.
	MaxBulk = 10000
	// PreviewIDs is how many ids a dry run lists.
	PreviewIDs = 100
	// MaxJobList is the most jobs Jobs returns.
	MaxJobList = 100
)

// ErrJobNotFound is returned when no replay job has the requested id.
var ErrJobNotFound = errors.New("replay job not found")

// ErrJobFinished means a job cannot be cancelled because it already ended.
var ErrJobFinished = errors.New("replay job already finished")

// BulkRequest selects the open letters to replay: the list filters (status
// may only be "open" or empty) and how many at most.
type BulkRequest struct {
	Topic         string
	Status        string
	ErrorClass    string
	Since         time.Time
	Until         time.Time
	PayoutID      string
	User          string
	CorrelationID string
	EventType     string
	// IDs, when set, limits the replay to these letters (the rows someone
	// selected on the page) among those the filters match.
	IDs    []int64
	Max    int
	Reason string
}

// match is the request's filters as the store takes them.
func (r BulkRequest) match() store.Match {
	return store.Match{Topic: r.Topic, Status: r.Status, ErrorClass: r.ErrorClass, Since: r.Since, Until: r.Until,
		PayoutID: r.PayoutID, User: r.User, CorrelationID: r.CorrelationID, EventType: r.EventType}
}

// Validate returns a *input.Invalid naming the first bad field.
func (r BulkRequest) Validate() error {
	if r.Status != "" && r.Status != store.StatusOpen {
		return &input.Invalid{Param: "status", Reason: "must be open or omitted: only open letters are replayed"}
	}
	if r.Max < 1 || r.Max > MaxBulk {
		return &input.Invalid{Param: "max", Reason: fmt.Sprintf("is required: an integer between 1 and %d", MaxBulk)}
	}
	if len(r.IDs) > MaxBulk {
		return &input.Invalid{Param: "ids", Reason: fmt.Sprintf("must list at most %d letters", MaxBulk)}
	}
	for _, id := range r.IDs {
		if id < 1 {
			return &input.Invalid{Param: "ids", Reason: "must be positive letter ids"}
		}
	}
	if err := r.match().Validate(); err != nil {
		return err
	}
	return input.CheckReason(r.Reason, "")
}

func (r BulkRequest) filter() JobFilter {
	f := JobFilter{Topic: r.Topic, Status: store.StatusOpen, ErrorClass: r.ErrorClass,
		PayoutID: r.PayoutID, User: r.User, CorrelationID: r.CorrelationID, EventType: r.EventType, IDs: r.IDs}
	if !r.Since.IsZero() {
		t := r.Since.UTC()
		f.Since = &t
	}
	if !r.Until.IsZero() {
		t := r.Until.UTC()
		f.Until = &t
	}
	return f
}

// JobFilter is a job's selection as stored in replay_jobs.filter.
type JobFilter struct {
	Topic      string     `json:"topic,omitempty"`
	Status     string     `json:"status"`
	ErrorClass string     `json:"error_class,omitempty"`
	Since      *time.Time `json:"since,omitempty"`
	Until      *time.Time `json:"until,omitempty"`
	// The subject filters (migration 000009); absent from older jobs,
	// which is "any".
	PayoutID      string `json:"payout_id,omitempty"`
	User          string `json:"user,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	EventType     string `json:"event_type,omitempty"`
	// IDs are the letters picked by hand (absent: every match).
	IDs []int64 `json:"ids,omitempty"`
}

func (f JobFilter) selection(after, upto int64) store.Selection {
	sel := store.Selection{Match: store.Match{Topic: f.Topic, ErrorClass: f.ErrorClass, PayoutID: f.PayoutID,
		User: f.User, CorrelationID: f.CorrelationID, EventType: f.EventType}, After: after, Upto: upto, IDs: f.IDs}
	if f.Since != nil {
		sel.Since = *f.Since
	}
	if f.Until != nil {
		sel.Until = *f.Until
	}
	return sel
}

// Job is one bulk replay and its progress.
type Job struct {
	ID     int64
	Actor  string
	Reason string
	Filter JobFilter
	Max    int
	// UptoID bounds the job to letters that existed when it was created.
	UptoID int64
	Status string
	// Matched is how many open letters matched when the job started.
	Matched int
	// Replayed (republished), Noop (resolved without publishing: the
	// subject was already final), Skipped (no longer open when reached)
	// and Failed (not replayable) count the letters handled so far;
	// Replayed+Noop+Failed never exceeds Max.
	Replayed   int
	Noop       int
	Skipped    int
	Failed     int
	LastError  *string
	CursorID   int64
	CreatedAt  time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time
}

func (j Job) remaining() int { return j.Max - j.Replayed - j.Noop - j.Failed }

// jobRow is the row every statement returning a job returns (queries.sql);
// the others' row types convert to it.
type jobRow = sqlcdb.GetJobRow

// toJob is the Job of row r, or r's error.
func toJob(r jobRow, err error) (Job, error) {
	if err != nil {
		return Job{}, err
	}
	j := Job{ID: r.ID, Actor: r.Actor, Reason: r.Reason, Max: r.Max, UptoID: r.UptoID, Status: r.Status, Matched: r.Matched,
		Replayed: r.Replayed, Noop: r.Noop, Skipped: r.Skipped, Failed: r.Failed, LastError: r.LastError, CursorID: r.CursorID,
		CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt}
	if err := json.Unmarshal(r.Filter, &j.Filter); err != nil {
		return Job{}, fmt.Errorf("decode filter of replay job %d: %w", j.ID, err)
	}
	return j, nil
}

// Preview is what a bulk replay would do now.
type Preview struct {
	// Matched counts the open letters matching the filter.
	Matched int64
	// WouldReplay is min(Matched, Max).
	WouldReplay int64
	// IDs are the first letters it would replay, oldest first (at most
	// PreviewIDs).
	IDs []int64
}

// Preview answers a dry run: what CreateJob would replay, changing nothing.
func (s *Service) Preview(ctx context.Context, req BulkRequest) (_ Preview, err error) {
	defer fault.Mark(&err, what)
	if err := req.Validate(); err != nil {
		return Preview{}, err
	}
	upto, err := store.MaxID(ctx, s.pool)
	if err != nil {
		return Preview{}, err
	}
	sel := req.filter().selection(0, upto)
	n, err := s.store.CountOpen(ctx, sel)
	if err != nil {
		return Preview{}, err
	}
	ids, err := s.store.OpenIDs(ctx, sel, min(req.Max, PreviewIDs))
	if err != nil {
		return Preview{}, err
	}
	return Preview{Matched: n, WouldReplay: min(n, int64(req.Max)), IDs: ids}, nil
}

// CreateJob queues a bulk replay for actor: the replay_jobs row, its River
// job and its audit_log row, in one transaction; a Worker does the work.
func (s *Service) CreateJob(ctx context.Context, actor string, req BulkRequest) (_ Job, err error) {
	defer fault.Mark(&err, what)
	if err := req.Validate(); err != nil {
		return Job{}, err
	}
	var job Job
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		job, err = s.createJobTx(ctx, tx, actor, req, nil)
		return err
	})
	if err != nil {
		return Job{}, err
	}
	s.logger.InfoContext(ctx, "bulk replay queued", "replay_job_id", job.ID, "actor", actor, "max", job.Max)
	return job, nil
}

// Job returns job id, or ErrJobNotFound.
func (s *Service) Job(ctx context.Context, id int64) (_ Job, err error) {
	defer fault.Mark(&err, what)
	j, err := toJob(s.q.GetJob(ctx, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Job{}, ErrJobNotFound
	}
	if err != nil {
		return Job{}, fmt.Errorf("get replay job %d: %w", id, err)
	}
	return j, nil
}

// Jobs returns the latest limit jobs, newest first.
func (s *Service) Jobs(ctx context.Context, limit int) (_ []Job, err error) {
	defer fault.Mark(&err, what)
	if limit < 1 || limit > MaxJobList {
		limit = MaxJobList
	}
	rows, err := s.q.ListJobs(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("list replay jobs: %w", err)
	}
	jobs := make([]Job, len(rows))
	for i, r := range rows {
		if jobs[i], err = toJob(jobRow(r), nil); err != nil {
			return nil, fmt.Errorf("list replay jobs: %w", err)
		}
	}
	return jobs, nil
}

// CancelJob stops a queued or running job on behalf of actor: letters
// already replayed stay replayed, no further letter is. Errors:
// ErrJobNotFound, ErrJobFinished.
func (s *Service) CancelJob(ctx context.Context, id int64, actor string) (_ Job, err error) {
	defer fault.Mark(&err, what)
	var job Job
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		status, err := q.LockJob(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrJobNotFound
		}
		if err != nil {
			return fmt.Errorf("lock replay job %d: %w", id, err)
		}
		if status != JobQueued && status != JobRunning {
			return fmt.Errorf("replay job %d is %s: %w", id, status, ErrJobFinished)
		}
		now := s.now()
		row, err := q.CancelJob(ctx, sqlcdb.CancelJobParams{ID: id, FinishedAt: now})
		if job, err = toJob(jobRow(row), err); err != nil {
			return fmt.Errorf("cancel replay job %d: %w", id, err)
		}
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: store.ActionReplayJobStop, TargetType: store.TargetReplayJob,
			TargetID: audit.ID(id), At: now, Detail: map[string]any{"replayed": job.Replayed, "was": status}})
	})
	if err != nil {
		return Job{}, err
	}
	return job, nil
}

// Outcomes of a letter in a job besides store.OutcomeRepublished and
// store.OutcomeNoop.
const (
	// JobLetterNotReplayable: the letter cannot be put back (Error says
	// why); it stays open.
	JobLetterNotReplayable = "not_replayable"
	// JobLetterSkipped: someone resolved the letter before the job reached it.
	JobLetterSkipped = "skipped"
)

// MaxJobLetters is the most letters JobLetters returns at once.
const MaxJobLetters = 500

// JobLetter is what a bulk replay did with one letter.
type JobLetter struct {
	DeadLetterID int64
	Outcome      string
	OutboxID     int64
	SubjectState string
	Error        string
	At           time.Time
}

// JobLetters returns what job id did with its letters, in letter id order,
// those after letter after, at most limit (1..MaxJobLetters). Errors:
// ErrJobNotFound.
func (s *Service) JobLetters(ctx context.Context, id, after int64, limit int) (_ []JobLetter, err error) {
	defer fault.Mark(&err, what)
	exists, err := s.q.JobExists(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get replay job %d: %w", id, err)
	}
	if !exists {
		return nil, ErrJobNotFound
	}
	if limit < 1 || limit > MaxJobLetters {
		limit = MaxJobLetters
	}
	rows, err := s.q.JobLetters(ctx, sqlcdb.JobLettersParams{JobID: id, After: after, MaxRows: limit})
	if err != nil {
		return nil, fmt.Errorf("list letters of replay job %d: %w", id, err)
	}
	letters := make([]JobLetter, len(rows))
	for i, r := range rows {
		l := JobLetter{DeadLetterID: r.DeadLetterID, Outcome: r.Outcome, At: r.At}
		if r.OutboxID != nil {
			l.OutboxID = *r.OutboxID
		}
		if r.SubjectState != nil {
			l.SubjectState = *r.SubjectState
		}
		if r.Error != nil {
			l.Error = *r.Error
		}
		letters[i] = l
	}
	return letters, nil
}

func nonZero(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}
