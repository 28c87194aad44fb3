package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/aegis-payments/aegis/pkg/config"
)

const (
	// minScheduleInterval is River's least UniqueOpts.ByPeriod.
	minScheduleInterval = time.Second
	// scheduleInsertTimeout bounds one insert of a scheduled job.
	scheduleInsertTimeout = 30 * time.Second
	// scheduleRetry is how soon a failed insert is tried again (within its
	// period: at the period's end the next period's job is due anyway).
	scheduleRetry = 5 * time.Second
)

// Schedule is a job a service runs every Interval. Every replica of the
// service inserts it at the start of each period (UTC multiples of
// Interval, as River's UniqueOpts.ByPeriod counts them), unique by period:
// the period gets one job however many replicas insert it, and whichever
// River client of the schema leads.
type Schedule struct {
	// Interval is the period: at least a second (River's least ByPeriod).
	Interval time.Duration
	// RunOnStart also inserts the current period's job when the runner
	// starts: a no-op when the period has one already (a restart, another
	// replica), so a long interval's first job does not wait a period.
	RunOnStart bool
	// Job returns the job to insert. Its UniqueOpts.ByPeriod is set to
	// Interval (Args); any other unique option it sets is kept, and its
	// ByState, if set, must hold the states River requires.
	Job func() (river.JobArgs, *river.InsertOpts)
}

// Args is the job Schedule inserts, unique per period.
func (s Schedule) Args() (river.JobArgs, *river.InsertOpts) {
	args, opts := s.Job()
	var o river.InsertOpts
	if opts != nil {
		o = *opts
	}
	o.UniqueOpts.ByPeriod = s.Interval
	return args, &o
}

func (s Schedule) validate(i int) error {
	switch {
	case s.Interval < minScheduleInterval:
		return config.Invalid(fmt.Sprintf("Schedules[%d].Interval", i), "must be at least %s", minScheduleInterval)
	case s.Job == nil:
		return config.Invalid(fmt.Sprintf("Schedules[%d].Job", i), "is required")
	}
	return nil
}

// nextPeriod is the start of the period after the one now is in.
func nextPeriod(now time.Time, interval time.Duration) time.Time {
	return now.Truncate(interval).Add(interval)
}

// runSchedule inserts s's job at each period's start until ctx ends. The
// clock is the real one: River reads it for the job's period.
func (r *Runner) runSchedule(ctx context.Context, s Schedule) {
	args, _ := s.Args()
	logger := r.logger.With("job_kind", args.Kind(), "interval", s.Interval.String())
	next := nextPeriod(time.Now(), s.Interval)
	if s.RunOnStart {
		next = time.Now()
	}
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := time.Now()
		next = nextPeriod(now, s.Interval)
		if err := r.insertScheduled(ctx, s, logger); err != nil {
			if ctx.Err() != nil {
				return
			}
			logger.Error("scheduled job not inserted; trying again", "error", err.Error())
			if retry := now.Add(scheduleRetry); retry.Before(next) {
				next = retry
			}
		}
		timer.Reset(time.Until(next))
	}
}

// insertScheduled inserts s's job for the current period.
func (r *Runner) insertScheduled(ctx context.Context, s Schedule, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, scheduleInsertTimeout)
	defer cancel()
	args, opts := s.Args()
	res, err := r.client.Insert(ctx, args, opts)
	if err != nil {
		return fmt.Errorf("%s: insert scheduled %s: %w", r.name, args.Kind(), err)
	}
	if res.UniqueSkippedAsDuplicate {
		logger.Debug("scheduled job already inserted for this period", "job_id", res.Job.ID)
		return nil
	}
	logger.Info("scheduled job inserted", "job_id", res.Job.ID)
	return nil
}

// validateSchedules reports schedules that cannot work.
func validateSchedules(schedules []Schedule) error {
	var errs []error
	for i, s := range schedules {
		if err := s.validate(i); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
