package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/replay/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/store"
)

// Runner defaults.
const (
	DefaultRate  = 50.0
	DefaultLease = time.Minute
	DefaultPoll  = 2 * time.Second
	DefaultBatch = 100
)

// errLeaseLost means this runner no longer owns the job: it was cancelled,
// or its lease ran out and another runner took it over.
var errLeaseLost = errors.New("replay job lease lost")

// RunnerConfig tunes a Runner. Zero values take the defaults.
type RunnerConfig struct {
	// Owner names this runner in replay_jobs.locked_by; unique per process.
	Owner string
	// Rate is the most letters replayed per second (REPLAY_RATE).
	Rate float64
	// Lease is how long a claimed job stays this runner's without a sign
	// of life; a runner that dies holds its job this long at most.
	Lease time.Duration
	// Poll is how often idle runners look for queued jobs; a job created
	// through this process's Service wakes its runner at once.
	Poll time.Duration
	// Batch is how many letter ids are read at a time.
	Batch int
}

func (c RunnerConfig) withDefaults() RunnerConfig {
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.Poll == 0 {
		c.Poll = DefaultPoll
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	return c
}

// Validate reports settings that cannot work.
func (c RunnerConfig) Validate() error {
	var errs []error
	if c.Owner == "" {
		errs = append(errs, config.Invalid("Owner", "must be set"))
	}
	if c.Rate <= 0 {
		errs = append(errs, config.Invalid("Rate", "must be a positive number of letters per second"))
	}
	if c.Lease < time.Second {
		errs = append(errs, config.Invalid("Lease", "must be at least 1s"))
	}
	if c.Poll <= 0 {
		errs = append(errs, config.Invalid("Poll", "must be positive"))
	}
	if c.Batch < 1 {
		errs = append(errs, config.Invalid("Batch", "must be at least 1"))
	}
	return errors.Join(errs...)
}

// Runner works bulk replay jobs (see the package doc).
type Runner struct {
	svc    *Service
	cfg    RunnerConfig
	logger *slog.Logger
}

// NewRunner returns a runner for the jobs of svc.
func NewRunner(svc *Service, cfg RunnerConfig) (*Runner, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Runner{svc: svc, cfg: cfg, logger: svc.logger.With("runner", cfg.Owner)}, nil
}

// Run works jobs until ctx is done, then lets go of the job in hand (it
// stays running and is resumed by the next runner) and returns nil.
func (r *Runner) Run(ctx context.Context) error {
	poll := time.NewTicker(r.cfg.Poll)
	defer poll.Stop()
	for {
		worked, err := r.runOne(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			r.logger.Error("replay runner", "error", err.Error())
		}
		if worked && err == nil {
			continue // there may be more queued
		}
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
		case <-r.svc.wake:
		}
	}
}

// runOne claims one job and works it; it reports whether it found one.
func (r *Runner) runOne(ctx context.Context) (bool, error) {
	job, ok, err := r.claim(ctx)
	if err != nil || !ok {
		return false, err
	}
	log := r.logger.With("replay_job_id", job.ID)
	log.Info("replay job started", "actor", job.Actor, "max", job.Max, "matched", job.Matched,
		"replayed_before", job.Replayed, "cursor_id", job.CursorID)
	job, err = r.work(ctx, job)
	switch {
	case errors.Is(err, errLeaseLost):
		log.Info("replay job no longer ours (cancelled or taken over); stopping", "replayed", job.Replayed)
		return true, nil
	case err != nil && ctx.Err() != nil:
		r.release(ctx, job)
		log.Info("replay job paused for shutdown; another runner resumes it", "replayed", job.Replayed)
		return true, nil
	case err != nil && database.IsTransient(err):
		// Postgres is struggling: let go, and any runner resumes the job
		// at its next poll.
		r.release(ctx, job)
		return true, fmt.Errorf("replay job %d paused: %w", job.ID, err)
	case err != nil:
		// Retrying would fail the same way: end the job and say why.
		r.fail(ctx, job, err)
		return true, fmt.Errorf("replay job %d failed: %w", job.ID, err)
	}
	log.Info("replay job finished", "status", job.Status, "replayed", job.Replayed, "noop", job.Noop, "skipped", job.Skipped, "failed", job.Failed)
	return true, nil
}

// claim takes the oldest claimable job, counts its matches on first start
// and audits the start, in one transaction.
func (r *Runner) claim(ctx context.Context) (Job, bool, error) {
	var job Job
	found := false
	err := database.InTx(ctx, r.svc.pool, func(tx pgx.Tx) error {
		now := r.svc.now()
		q := r.svc.q.WithTx(tx)
		row, err := q.NextJob(ctx, now)
		next, err := toJob(jobRow(row), err)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find a replay job: %w", err)
		}
		matched := int64(next.Matched)
		if next.StartedAt == nil {
			if matched, err = store.CountOpen(ctx, tx, next.Filter.selection(0, next.UptoID)); err != nil {
				return err
			}
		}
		started, err := q.StartJob(ctx, sqlcdb.StartJobParams{ID: next.ID, Now: now, Owner: r.cfg.Owner,
			LockedUntil: now.Add(r.cfg.Lease), Matched: int(matched)})
		job, err = toJob(jobRow(started), err)
		if err != nil {
			return fmt.Errorf("start replay job %d: %w", next.ID, err)
		}
		found = true
		return store.Audit(ctx, tx, store.AuditEntry{Actor: job.Actor, Action: store.ActionReplayJobRun,
			TargetType: store.TargetReplayJob, TargetID: store.ID(job.ID), Reason: job.Reason, At: now,
			Detail: map[string]any{"runner": r.cfg.Owner, "resumed": next.Status == JobRunning,
				"cursor_id": job.CursorID, "matched": job.Matched}})
	})
	if err != nil {
		return Job{}, false, err
	}
	return job, found, nil
}

// work replays the job's letters until Max are handled or none is left,
// then marks it done.
func (r *Runner) work(ctx context.Context, job Job) (Job, error) {
	p := &pacer{every: time.Duration(float64(time.Second) / r.cfg.Rate), beatEvery: r.cfg.Lease / 3}
	for job.remaining() > 0 {
		ids, err := r.svc.store.OpenIDs(ctx, job.Filter.selection(job.CursorID, job.UptoID), min(r.cfg.Batch, job.remaining()))
		if err != nil {
			return job, err
		}
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			if err := p.wait(ctx, func(ctx context.Context) error { return r.heartbeat(ctx, job.ID) }); err != nil {
				return job, err
			}
			if job, err = r.one(ctx, job, id); err != nil {
				return job, err
			}
			if job.remaining() == 0 {
				break
			}
		}
	}
	finished, err := r.svc.q.FinishJob(ctx, sqlcdb.FinishJobParams{ID: job.ID, Owner: r.cfg.Owner, Status: JobDone,
		FinishedAt: r.svc.now()})
	done, err := toJob(jobRow(finished), err)
	if errors.Is(err, pgx.ErrNoRows) {
		return job, errLeaseLost
	}
	if err != nil {
		return job, fmt.Errorf("finish replay job %d: %w", job.ID, err)
	}
	return done, nil
}

// one replays letter id for job and records the outcome in the job, in one
// transaction that also proves the job is still this runner's.
func (r *Runner) one(ctx context.Context, job Job, id int64) (Job, error) {
	var out Job
	err := database.InTx(ctx, r.svc.pool, func(tx pgx.Tx) error {
		var replayed, noop, skipped, failed int
		var lastErr *string
		res, err := r.svc.replayTx(ctx, tx, id, job.Actor, job.Reason, job.ID)
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
		now := r.svc.now()
		q := r.svc.q.WithTx(tx)
		if err := q.RecordJobLetter(ctx, sqlcdb.RecordJobLetterParams{JobID: job.ID, DeadLetterID: id, Outcome: letter.Outcome,
			OutboxID: nonZero(letter.OutboxID), SubjectState: letter.SubjectState, Error: letter.Error, At: now}); err != nil {
			return fmt.Errorf("record replay job %d letter %d: %w", job.ID, id, err)
		}
		advanced, err := q.Advance(ctx, sqlcdb.AdvanceParams{ID: job.ID, Owner: r.cfg.Owner, Replayed: replayed, Skipped: skipped,
			Failed: failed, LastError: lastErr, CursorID: id, LockedUntil: now.Add(r.cfg.Lease), Noop: noop})
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
	r.svc.notify()
	return out, nil
}

func (r *Runner) heartbeat(ctx context.Context, jobID int64) error {
	n, err := r.svc.q.Heartbeat(ctx, sqlcdb.HeartbeatParams{ID: jobID, Owner: r.cfg.Owner, LockedUntil: r.svc.now().Add(r.cfg.Lease)})
	if err != nil {
		return fmt.Errorf("extend replay job %d lease: %w", jobID, err)
	}
	if n == 0 {
		return errLeaseLost
	}
	return nil
}

// fail ends a job this runner owns as failed, with err as its last error.
func (r *Runner) fail(ctx context.Context, job Job, err error) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	msg := err.Error()
	if _, ferr := r.svc.q.FinishJob(fctx, sqlcdb.FinishJobParams{ID: job.ID, Owner: r.cfg.Owner, Status: JobFailed,
		FinishedAt: r.svc.now(), LastError: &msg}); ferr != nil && !errors.Is(ferr, pgx.ErrNoRows) {
		r.logger.Warn("could not mark replay job failed; it is resumed when its lease runs out", "replay_job_id", job.ID, "error", ferr.Error())
	}
}

// release lets go of a job this runner still owns, so that any runner can
// resume it at once. Best effort: otherwise its lease runs out.
func (r *Runner) release(ctx context.Context, job Job) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.svc.q.ReleaseJob(rctx, sqlcdb.ReleaseJobParams{ID: job.ID, Owner: r.cfg.Owner}); err != nil {
		r.logger.Warn("could not release replay job; it is resumed when its lease runs out", "replay_job_id", job.ID, "error", err.Error())
	}
}

// pacer spaces replays every apart. A slow letter does not earn a burst
// afterwards: the next slot is never earlier than now.
type pacer struct {
	every     time.Duration
	beatEvery time.Duration
	next      time.Time
}

// wait blocks until the next slot, calling beat at least every beatEvery
// while it waits (a very low rate must not lose the job's lease).
func (p *pacer) wait(ctx context.Context, beat func(context.Context) error) error {
	for {
		d := time.Until(p.next)
		if d <= 0 {
			break
		}
		step := min(d, p.beatEvery)
		t := time.NewTimer(step)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if step < d {
			if err := beat(ctx); err != nil {
				return err
			}
		}
	}
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	p.next = p.next.Add(p.every)
	return nil
}
