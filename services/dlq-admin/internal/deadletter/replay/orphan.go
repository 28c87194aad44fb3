package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/watch"
)

// OrphanActor is the audit_log actor of a job ended because its River job
// is gone.
const OrphanActor = "dlq-admin"

// orphanReason is the last_error of such a job.
const orphanReason = "its River job ended without finishing it (attempts spent, cancelled or deleted); " +
	"create a new replay job for the letters still open"

// maxOrphanCheck bounds the active jobs one EndOrphanedJobs looks at (the
// oldest first; the next call looks at the rest once these are ended).
const maxOrphanCheck = 100

// EndOrphanedJobs ends, as failed, every queued or running replay job whose
// River job will never work it (discarded after its last attempt,
// cancelled, or deleted), audits it and logs it as an error, and returns
// their ids. Without it such a job would say queued or running for ever,
// and nothing would tell an operator that its letters are still open: it
// is the replay's counterpart of jobs.EndOrphanedPSPRun. dlq-admin runs it
// on its watch loop (DLQ_CHECK_INTERVAL).
//
// A job and its River job are inserted in one transaction, so a job read
// here has its River job visible to the question that follows
// (jobs.HasLiveJob: River's client, never SQL on its tables). A job that
// finished meanwhile is left as it is (EndOrphanedJob matches only a
// job still queued or running).
func (s *Service) EndOrphanedJobs(ctx context.Context) (_ []int64, err error) {
	defer fault.Mark(&err, what)
	var ended []int64
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		ended = ended[:0]
		q := s.q.WithTx(tx)
		ids, err := q.ActiveJobIDs(ctx, maxOrphanCheck)
		if err != nil {
			return fmt.Errorf("list active replay jobs: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		for _, id := range ids {
			live, err := jobs.HasLiveJob(ctx, tx, jobs.KindReplay, "replay_job_id", id)
			if err != nil {
				return fmt.Errorf("replay job %d: %w", id, err)
			}
			if live {
				continue
			}
			now := s.now()
			row, err := q.EndOrphanedJob(ctx, sqlcdb.EndOrphanedJobParams{ID: id, FinishedAt: now, LastError: orphanReason})
			if errors.Is(err, pgx.ErrNoRows) {
				continue // it finished meanwhile
			}
			job, err := toJob(jobRow(row), err)
			if err != nil {
				return fmt.Errorf("end orphaned replay job %d: %w", id, err)
			}
			if err := audit.Write(ctx, tx, audit.Entry{Actor: OrphanActor, Action: store.ActionReplayJobStop,
				TargetType: store.TargetReplayJob, TargetID: audit.ID(id), At: now,
				Detail: map[string]any{"replayed": job.Replayed, "why": orphanReason}}); err != nil {
				return err
			}
			ended = append(ended, id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range ended {
		s.logger.ErrorContext(ctx, "replay job abandoned: its River job is gone; ended as failed, its remaining letters are still open",
			"replay_job_id", id)
	}
	return ended, nil
}

// OrphanWatcher runs EndOrphanedJobs every interval (DLQ_CHECK_INTERVAL)
// and counts the jobs it ended in aegis_replay_jobs_abandoned_total, which
// AegisReplayJobAbandoned alerts on: the row says failed and why, the alert
// tells an operator its letters are still open.
type OrphanWatcher struct {
	svc   *Service
	every time.Duration
	ended prometheus.Counter
}

// NewOrphanWatcher returns svc's watcher; reg takes its counter.
func NewOrphanWatcher(svc *Service, every time.Duration, reg prometheus.Registerer) (*OrphanWatcher, error) {
	if every <= 0 {
		return nil, errors.New("replay orphan watcher: the interval must be positive")
	}
	w := &OrphanWatcher{svc: svc, every: every, ended: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "aegis_replay_jobs_abandoned_total",
		Help: "Replay jobs ended as failed because their River job was gone (attempts spent, cancelled or deleted).",
	})}
	if err := reg.Register(w.ended); err != nil {
		return nil, fmt.Errorf("replay orphan watcher: %w", err)
	}
	return w, nil
}

// Check ends the orphaned jobs once and counts them.
func (w *OrphanWatcher) Check(ctx context.Context) (int, error) {
	ended, err := w.svc.EndOrphanedJobs(ctx)
	w.ended.Add(float64(len(ended)))
	return len(ended), err
}

// Run checks at once and then every interval until ctx ends.
func (w *OrphanWatcher) Run(ctx context.Context) error {
	return watch.Run(ctx, watch.Task{Every: w.every,
		Do: func(ctx context.Context) error { _, err := w.Check(ctx); return err },
		Failed: func(err error) {
			w.svc.logger.WarnContext(ctx, "replay jobs whose River job is gone: check failed", "error", err.Error())
		}})
}
