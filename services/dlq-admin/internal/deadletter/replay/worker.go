package replay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
)

// Worker defaults.
const (
	DefaultRate  = 50.0
	DefaultSlice = 30 * time.Second
	DefaultBatch = 100
)

// Queue is the River queue bulk replays run in (one per kind of work, so
// that a long replay never holds up a reconciliation): jobs.ReplayQueue,
// declared with the kind in pkg/jobs so that every River client of the
// suite knows it.
const Queue = jobs.ReplayQueue

// maxAttempts bounds River's retries of one replay job. Attempts are spent
// only by errors (a Postgres outage) and by crashes River rescues; slices and
// shutdowns snooze, which costs none.
const maxAttempts = 25

// JobArgs is the River job that works the replay_jobs row ReplayJobID. The
// row is the operator-facing record (progress, counts, cancel); the River
// job is only "work this row", inserted in the transaction that creates it.
type JobArgs struct {
	ReplayJobID int64 `json:"replay_job_id"`
}

// Kind names the job in river_job.kind.
func (JobArgs) Kind() string { return jobs.KindReplay }

// InsertOpts puts the job in Queue, one River job per replay job.
func (JobArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: maxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// Enqueuer inserts River jobs in the caller's transaction (a
// *river.Client[pgx.Tx], working or insert-only).
type Enqueuer interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// errLeaseLost means this worker no longer holds the job: it was
// cancelled, or River gave it to another attempt (see StartJob's token).
var errLeaseLost = errors.New("replay job taken over or cancelled")

// errSliceOver means the worker's slice ended with letters left: the job is
// snoozed and picked up again, by this client or another.
var errSliceOver = errors.New("replay job slice over")

// errStopping means the service is shutting down: the worker stopped
// between two letters and snoozes its job for the next client.
var errStopping = errors.New("replay worker stopping")

// WorkerConfig tunes a Worker. Zero values take the defaults.
type WorkerConfig struct {
	// Rate is the most letters replayed per second by one job (REPLAY_RATE).
	Rate float64
	// Slice is how long one River work call replays before it snoozes the
	// job: it bounds how long a job runs without River hearing of it, and
	// how long shutdown waits for it. Timeout must exceed it.
	Slice time.Duration
	// Timeout is the kind's (jobs.Kinds.ReplayTimeout, zero: its default):
	// River's timeout of one work call, and how long after it started
	// River's rescuer, on whichever client leads, takes a crashed worker's
	// job for a retry.
	Timeout time.Duration
	// Batch is how many letter ids are read at a time.
	Batch int
	// Stopping, when closed, makes a worker stop between two letters and
	// snooze its job (the service is shutting down).
	Stopping <-chan struct{}
}

func (c WorkerConfig) withDefaults() WorkerConfig {
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.Slice == 0 {
		c.Slice = DefaultSlice
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.Timeout == 0 {
		c.Timeout = jobs.DefaultReplayTimeout
	}
	return c
}

// Validate reports settings that cannot work.
func (c WorkerConfig) Validate() error {
	var errs []error
	if c.Rate <= 0 {
		errs = append(errs, config.Invalid("Rate", "must be a positive number of letters per second"))
	}
	if c.Slice < 100*time.Millisecond {
		errs = append(errs, config.Invalid("Slice", "must be at least 100ms"))
	}
	if c.Batch < 1 {
		errs = append(errs, config.Invalid("Batch", "must be at least 1"))
	}
	if c.Timeout <= c.Slice {
		errs = append(errs, config.Invalid("Timeout", "must be longer than Slice: a live worker's job would be cancelled and rescued"))
	}
	return errors.Join(errs...)
}

// Worker works bulk replay jobs on River (see the package doc).
type Worker struct {
	river.WorkerDefaults[JobArgs]
	svc    *Service
	cfg    WorkerConfig
	logger *slog.Logger
}

// NewWorker returns River's worker for the jobs of svc.
func NewWorker(svc *Service, cfg WorkerConfig) (*Worker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Worker{svc: svc, cfg: cfg, logger: svc.logger}, nil
}

// Timeout is the kind's (jobs.Kinds.ReplayTimeout, longer than a slice):
// a work call bounds itself (Slice), so the timeout never cuts a live one
// short. Every River client of the suite states the same for the kind
// (pkg/jobs' stand-in on webhook-api's), so a crashed replica's job is
// retried after it whichever client leads. It must be positive: River's
// rescuer never rescues the job of a worker whose timeout is negative.
func (w *Worker) Timeout(*river.Job[JobArgs]) time.Duration { return w.cfg.Timeout }

// Work works replay job job.Args.ReplayJobID for one slice. Its result is
// River's instruction: nil when the job is over (done, cancelled, taken
// over), a snooze when letters are left (slice over, shutdown), an error to
// retry later (Postgres trouble), a cancel when retrying cannot help (the
// replay_jobs row says why).
func (w *Worker) Work(ctx context.Context, rj *river.Job[JobArgs]) error {
	id := rj.Args.ReplayJobID
	owner, err := token(rj)
	if err != nil {
		return err
	}
	log := w.logger.With("replay_job_id", id, "river_job_id", rj.ID, "attempt", rj.Attempt)
	job, ok, err := w.start(ctx, id, owner)
	if err != nil {
		return fmt.Errorf("start replay job %d: %w", id, err)
	}
	if !ok {
		log.Info("replay job already ended; nothing to do")
		return nil
	}
	job, wait, err := w.work(ctx, job, owner, time.Now().Add(w.cfg.Slice))
	switch {
	case errors.Is(err, errLeaseLost):
		log.Info("replay job no longer ours (cancelled or taken over); stopping", "replayed", job.Replayed)
		return nil
	case errors.Is(err, errSliceOver):
		w.release(ctx, job, owner)
		return river.JobSnooze(wait)
	case errors.Is(err, errStopping) || (err != nil && ctx.Err() != nil):
		w.release(ctx, job, owner)
		log.Info("replay job paused for shutdown; River resumes it", "replayed", job.Replayed)
		return river.JobSnooze(0)
	case err != nil && database.IsTransient(err):
		// Postgres is struggling: River retries with its backoff.
		w.release(ctx, job, owner)
		return fmt.Errorf("replay job %d paused: %w", id, err)
	case err != nil:
		// Retrying would fail the same way: end the job and say why.
		w.fail(ctx, job, owner, err)
		return river.JobCancel(fmt.Errorf("replay job %d failed: %w", id, err))
	}
	log.Info("replay job finished", "status", job.Status, "replayed", job.Replayed, "noop", job.Noop, "skipped", job.Skipped, "failed", job.Failed)
	return nil
}

// token is this work call's fencing token in replay_jobs.locked_by: River's
// job id and attempt, and a random suffix (a snoozed job keeps its attempt).
func token(rj *river.Job[JobArgs]) (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("replay job token: %w", err)
	}
	return fmt.Sprintf("river-%d-%d-%s", rj.ID, rj.Attempt, hex.EncodeToString(b)), nil
}

// start takes job id for owner, counts its matches on first start and
// audits a start or a takeover, in one transaction. ok is false when the
// job is over (cancelled before it ran, or finished).
func (w *Worker) start(ctx context.Context, id int64, owner string) (Job, bool, error) {
	var job Job
	ok := false
	err := database.InTx(ctx, w.svc.pool, func(tx pgx.Tx) error {
		now := w.svc.now()
		q := w.svc.q.WithTx(tx)
		cur, err := q.LockJobForWork(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // deleted: nothing to work
		}
		if err != nil {
			return fmt.Errorf("lock replay job: %w", err)
		}
		if cur.Status != JobQueued && cur.Status != JobRunning {
			return nil
		}
		var matched int64
		if !cur.Started {
			if matched, err = w.firstMatch(ctx, tx, id); err != nil {
				return err
			}
		}
		started, err := q.StartJob(ctx, sqlcdb.StartJobParams{ID: id, Now: now, Owner: owner, Matched: int(matched)})
		if job, err = toJob(jobRow(started), err); err != nil {
			return fmt.Errorf("take replay job: %w", err)
		}
		ok = true
		// A job another worker let go of cleanly (slice over, shutdown) goes
		// on silently; a first start and a takeover (a worker died holding
		// it) are audited.
		takeover := cur.LockedBy != ""
		if cur.Started && !takeover {
			return nil
		}
		return audit.Write(ctx, tx, audit.Entry{Actor: job.Actor, Action: store.ActionReplayJobRun,
			TargetType: store.TargetReplayJob, TargetID: audit.ID(job.ID), Reason: job.Reason, At: now,
			Detail: map[string]any{"runner": owner, "resumed": cur.Started, "cursor_id": job.CursorID, "matched": job.Matched}})
	})
	if err != nil {
		return Job{}, false, err
	}
	return job, ok, nil
}

// firstMatch counts the open letters job id selects, at its first start.
func (w *Worker) firstMatch(ctx context.Context, tx pgx.Tx, id int64) (int64, error) {
	j, err := toJob(w.svc.q.WithTx(tx).GetJob(ctx, id))
	if err != nil {
		return 0, fmt.Errorf("read replay job: %w", err)
	}
	return store.CountOpen(ctx, tx, j.Filter.selection(0, j.UptoID))
}

// work replays the job's letters until Max are handled or none is left,
// then marks it done; or until deadline, then returns errSliceOver and how
// long until the pace allows the next letter.
func (w *Worker) work(ctx context.Context, job Job, owner string, deadline time.Time) (Job, time.Duration, error) {
	p := &pacer{every: time.Duration(float64(time.Second) / w.cfg.Rate)}
	for job.remaining() > 0 {
		ids, err := w.svc.store.OpenIDs(ctx, job.Filter.selection(job.CursorID, job.UptoID), min(w.cfg.Batch, job.remaining()))
		if err != nil {
			return job, 0, err
		}
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			if w.stopping() {
				return job, 0, errStopping
			}
			if next := p.nextSlot(); next.After(deadline) {
				return job, time.Until(next), errSliceOver
			}
			if err := p.wait(ctx); err != nil {
				return job, 0, err
			}
			if job, err = w.one(ctx, job, owner, id); err != nil {
				return job, 0, err
			}
			if job.remaining() == 0 {
				break
			}
		}
	}
	finished, err := w.svc.q.FinishJob(ctx, sqlcdb.FinishJobParams{ID: job.ID, Owner: owner, Status: JobDone,
		FinishedAt: w.svc.now()})
	done, err := toJob(jobRow(finished), err)
	if errors.Is(err, pgx.ErrNoRows) {
		return job, 0, errLeaseLost
	}
	if err != nil {
		return job, 0, fmt.Errorf("finish replay job %d: %w", job.ID, err)
	}
	return done, 0, nil
}

func (w *Worker) stopping() bool {
	select {
	case <-w.cfg.Stopping:
		return true
	default:
		return false
	}
}

// one replays letter id for job and records the outcome in the job, in one
// transaction that also proves the job is still this worker's.
func (w *Worker) one(ctx context.Context, job Job, owner string, id int64) (Job, error) {
	var out Job
	err := database.InTx(ctx, w.svc.pool, func(tx pgx.Tx) error {
		var replayed, noop, skipped, failed int
		var lastErr *string
		res, err := w.svc.replayTx(ctx, tx, id, job.Actor, job.Reason, job.ID)
		letter := JobLetter{DeadLetterID: id, Outcome: res.Outcome, OutboxID: res.OutboxID, SubjectState: res.SubjectState}
		switch {
		case err == nil && res.Outcome == store.OutcomeNoop:
			noop = 1
		case err == nil:
			replayed = 1
		case errors.Is(err, ErrNotOpen), errors.Is(err, store.ErrNotFound):
			skipped = 1 // resolved meanwhile by someone else
			letter.Outcome = JobLetterSkipped
		case errors.Is(err, ErrNotReplayable):
			failed = 1
			msg := fmt.Sprintf("dead letter %d: %v", id, err)
			lastErr = &msg
			letter.Outcome, letter.Error = JobLetterNotReplayable, err.Error()
		default:
			return err
		}
		now := w.svc.now()
		q := w.svc.q.WithTx(tx)
		if err := q.RecordJobLetter(ctx, sqlcdb.RecordJobLetterParams{JobID: job.ID, DeadLetterID: id, Outcome: letter.Outcome,
			OutboxID: nonZero(letter.OutboxID), SubjectState: letter.SubjectState, Error: letter.Error, At: now}); err != nil {
			return fmt.Errorf("record replay job %d letter %d: %w", job.ID, id, err)
		}
		advanced, err := q.Advance(ctx, sqlcdb.AdvanceParams{ID: job.ID, Owner: owner, Replayed: replayed, Skipped: skipped,
			Failed: failed, LastError: lastErr, CursorID: id, Noop: noop})
		out, err = toJob(jobRow(advanced), err)
		if errors.Is(err, pgx.ErrNoRows) {
			return errLeaseLost // rolls the replay back
		}
		if err != nil {
			return fmt.Errorf("record replay job %d progress: %w", job.ID, err)
		}
		return nil
	})
	if err != nil {
		return job, err
	}
	w.svc.notify()
	return out, nil
}

// fail ends a job this worker holds as failed, with err as its last error.
func (w *Worker) fail(ctx context.Context, job Job, owner string, err error) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	msg := err.Error()
	if _, ferr := w.svc.q.FinishJob(fctx, sqlcdb.FinishJobParams{ID: job.ID, Owner: owner, Status: JobFailed,
		FinishedAt: w.svc.now(), LastError: &msg}); ferr != nil && !errors.Is(ferr, pgx.ErrNoRows) {
		w.logger.Warn("could not mark replay job failed", "replay_job_id", job.ID, "error", ferr.Error())
	}
}

// release lets go of a job this worker still holds, so that its next
// attempt is not taken for a takeover. Best effort: the next attempt takes
// the job either way.
func (w *Worker) release(ctx context.Context, job Job, owner string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := w.svc.q.ReleaseJob(rctx, sqlcdb.ReleaseJobParams{ID: job.ID, Owner: owner}); err != nil {
		w.logger.Warn("could not release replay job", "replay_job_id", job.ID, "error", err.Error())
	}
}

// pacer spaces replays every apart. A slow letter does not earn a burst
// afterwards: the next slot is never earlier than now.
type pacer struct {
	every time.Duration
	next  time.Time
}

// nextSlot is when wait would return.
func (p *pacer) nextSlot() time.Time {
	if now := time.Now(); p.next.Before(now) {
		return now
	}
	return p.next
}

// wait blocks until the next slot, or until ctx is done.
func (p *pacer) wait(ctx context.Context) error {
	if d := time.Until(p.next); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	p.next = p.next.Add(p.every)
	return nil
}
