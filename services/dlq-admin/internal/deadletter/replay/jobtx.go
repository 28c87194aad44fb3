package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
)

// createJobTx is CreateJob within the caller's tx; for a job a second
// operator approved, the approval and the job commit together. actor is who asked for it; detail is added to its audit_log
// row (the approval and its approver). The River job that works it is
// inserted in tx too: it runs once tx commits, and never if tx rolls back.
func (s *Service) createJobTx(ctx context.Context, tx pgx.Tx, actor string, req BulkRequest, detail map[string]any) (Job, error) {
	if err := req.Validate(); err != nil {
		return Job{}, err
	}
	if s.jobs == nil {
		return Job{}, errors.New("replay jobs: no River client to queue them on (Service.WithJobs)")
	}
	filter, err := json.Marshal(req.filter())
	if err != nil {
		return Job{}, fmt.Errorf("encode replay job filter: %w", err)
	}
	upto, err := store.MaxID(ctx, tx)
	if err != nil {
		return Job{}, err
	}
	now := s.now()
	row, err := s.q.WithTx(tx).InsertJob(ctx, sqlcdb.InsertJobParams{Actor: actor, Reason: req.Reason, Filter: filter,
		Max: req.Max, UptoID: upto, CreatedAt: now})
	job, err := toJob(jobRow(row), err)
	if err != nil {
		return Job{}, fmt.Errorf("insert replay job: %w", err)
	}
	if _, err := s.jobs.InsertTx(ctx, tx, JobArgs{ReplayJobID: job.ID}, nil); err != nil {
		return Job{}, fmt.Errorf("queue River job for replay job %d: %w", job.ID, err)
	}
	d := map[string]any{"filter": job.Filter, "max": job.Max, "upto_id": job.UptoID}
	for k, v := range detail {
		d[k] = v
	}
	err = audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: store.ActionBulkReplay, TargetType: store.TargetReplayJob,
		TargetID: audit.ID(job.ID), Reason: req.Reason, At: now, Detail: d})
	return job, err
}
