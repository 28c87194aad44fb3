package jobs

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// liveJobStates are a River job's states in which it will still be worked.
func liveJobStates() []rivertype.JobState {
	return []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
		rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled}
}

// HasLiveJob reports whether the River job of kind whose args' field arg
// is id (a replay's replay_job_id, a PSP run's run_id) will still be
// worked: available, pending, retryable, running or scheduled (a snoozed
// job). It is false when the job was discarded after its last attempt,
// cancelled, completed or deleted. River's jobs are read through River's
// client (JobListTx, on the caller's transaction), never by SQL on its
// tables, and only that one job is asked for, so no number of other jobs
// of the kind can hide it. A record and its job are inserted in one
// transaction: read the record first, then ask, in the same transaction.
func HasLiveJob(ctx context.Context, tx pgx.Tx, kind, arg string, id int64) (bool, error) {
	// A client without a pool: JobListTx works on the caller's transaction.
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{})
	if err != nil {
		return false, fmt.Errorf("list the %s job of %s %d: River client: %w", kind, arg, id, err)
	}
	res, err := client.JobListTx(ctx, tx, river.NewJobListParams().
		Kinds(kind).States(liveJobStates()...).
		Where("args->>@arg = @id", river.NamedArgs{"arg": arg, "id": strconv.FormatInt(id, 10)}).First(1))
	if err != nil {
		return false, fmt.Errorf("list the %s job of %s %d: %w", kind, arg, id, err)
	}
	return len(res.Jobs) > 0, nil
}
