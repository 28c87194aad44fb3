package replay_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/jobs"
)

// waitFor guards waits on runners; it is not a timing assertion.
const waitFor = 60 * time.Second

// startRunner runs a River client working replay jobs (a replica of
// dlq-admin) until the test ends, with its own Service as in a process of
// its own.
func (b *bundle) startRunner(t *testing.T, owner string) {
	t.Helper()
	b.runner(t, owner, jobs.Config{ReplayRate: 2000, ReplayBatch: 7})
}

// runner starts a River client with cfg and stops it when the test ends;
// stopping it earlier is harmless.
func (b *bundle) runner(t *testing.T, owner string, cfg jobs.Config) *jobs.Runner {
	t.Helper()
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil)).With("runner", owner)
	if cfg.FetchPoll == 0 {
		cfg.FetchPoll = 20 * time.Millisecond
	}
	svc := replay.New(b.db.Pool, b.st, lifecycle.Deps{Logger: logger, Clock: func() time.Time { return t0.Add(time.Hour) }})
	r, err := jobs.New(b.db.Pool, svc, nil, cfg, lifecycle.Deps{Logger: logger})
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })
	return r
}

func (b *bundle) waitFinished(t *testing.T, id int64) replay.Job {
	t.Helper()
	var job replay.Job
	require.Eventually(t, func() bool {
		var err error
		job, err = b.svc.Job(context.Background(), id)
		require.NoError(t, err)
		return job.FinishedAt != nil
	}, waitFor, 10*time.Millisecond)
	return job
}

// mixed stores n open transient letters on aegis.transactions plus noise the
// filter must leave alone, and returns the matching ids.
func (b *bundle) mixed(t *testing.T, n int) []int64 {
	t.Helper()
	var ids []int64
	for i := range n {
		ids = append(ids, b.letter(t, nil))
		if i%3 == 0 {
			b.letter(t, func(l *dlq.Letter) { l.ErrorClass = "permanent" })
			b.letter(t, func(l *dlq.Letter) { l.OriginalTopic = kafkax.TopicSettlements })
		}
	}
	resolved := b.letter(t, nil)
	_, err := b.svc.Discard(context.Background(), resolved, "ops", "noise")
	require.NoError(t, err)
	return ids
}

func request(max int) replay.BulkRequest {
	return replay.BulkRequest{Topic: kafkax.TopicTransactions, ErrorClass: "transient", Max: max, Reason: "psp recovered"}
}

func TestDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.mixed(t, 12)
	before := b.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'open'`)

	p, err := b.svc.Preview(context.Background(), request(5))
	require.NoError(t, err)
	require.Equal(t, int64(12), p.Matched)
	require.Equal(t, int64(5), p.WouldReplay)
	require.Equal(t, ids[:5], p.IDs, "oldest first, at most max")

	require.Empty(t, b.outbox(t))
	require.Zero(t, b.count(t, `SELECT count(*) FROM replay_jobs`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM audit_log WHERE action <> 'discard'`))
	require.Equal(t, before, b.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'open'`))
}

func TestBulkRequestValidation(t *testing.T) {
	t.Parallel()
	for param, req := range map[string]replay.BulkRequest{
		"max":    {Max: 0},
		"status": {Status: store.StatusReplayed, Max: 1},
		"until":  {Max: 1, Since: t0, Until: t0},
	} {
		err := req.Validate()
		var invalid *input.Invalid
		require.ErrorAs(t, err, &invalid, param)
		require.Equal(t, param, invalid.Param)
	}
	require.Error(t, replay.BulkRequest{Max: replay.MaxBulk + 1}.Validate())
	require.NoError(t, replay.BulkRequest{Status: store.StatusOpen, Max: replay.MaxBulk}.Validate())
}

func TestJobReplaysExactlyMaxOfMoreMatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.mixed(t, 20)
	poison := b.letter(t, func(l *dlq.Letter) { l.Payload = []byte("not json") })
	// A letter poisoned in the middle of the selection counts as failed.
	job, err := b.svc.CreateJob(ctx, "bob", request(21))
	require.NoError(t, err)
	require.Equal(t, replay.JobQueued, job.Status)
	b.startRunner(t, "runner-a")
	job = b.waitFinished(t, job.ID)
	require.Equal(t, replay.JobDone, job.Status)
	require.Equal(t, 21, job.Matched)
	require.Equal(t, 20, job.Replayed)
	require.Equal(t, 1, job.Failed)
	require.Zero(t, job.Skipped)
	require.Contains(t, *job.LastError, fmt.Sprintf("dead letter %d", poison))
	require.Len(t, b.outbox(t), 20)

	// More matches than max: exactly max are replayed, oldest first.
	more := b.mixed(t, 9)
	job, err = b.svc.CreateJob(ctx, "carol", request(4))
	require.NoError(t, err)
	job = b.waitFinished(t, job.ID)
	require.Equal(t, replay.JobDone, job.Status)
	require.Equal(t, 10, job.Matched, "nine new letters and the poison one, still open")
	require.Equal(t, 3, job.Replayed)
	require.Equal(t, 1, job.Failed, "the poison letter comes first and fails again")
	rows := b.outbox(t)
	require.Len(t, rows, 23)
	for i, r := range rows[20:] {
		require.Equal(t, fmt.Sprint(more[i]), r.Headers[replay.HeaderReplayOf])
	}
	// Six of the nine are still open, and so is the poison letter.
	require.Equal(t, 7, b.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'open' AND original_topic = 'aegis.transactions' AND error_class = 'transient'`))
	require.Equal(t, 23, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'replay' AND detail ? 'replay_job_id'`))
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'bulk_replay'`))
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'replay_job_start'`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'replay' AND actor = 'carol' AND target_id = $1`, fmt.Sprint(more[0])))
}

func TestJobIgnoresLettersNewerThanItself(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.mixed(t, 3)
	job, err := b.svc.CreateJob(ctx, "bob", request(100))
	require.NoError(t, err)
	late := b.letter(t, nil) // fails after the job was asked for
	b.startRunner(t, "runner-a")
	job = b.waitFinished(t, job.ID)
	require.Equal(t, 3, job.Replayed)
	require.Less(t, job.UptoID, late)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'open' AND id = $1`, late))
}

func TestTwoRunnersNeverReplayALetterTwice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := b.mixed(t, 60)
	// Three overlapping jobs for the same letters, worked by two runners.
	var jobs []int64
	for range 3 {
		job, err := b.svc.CreateJob(ctx, "bob", request(60))
		require.NoError(t, err)
		jobs = append(jobs, job.ID)
	}
	b.startRunner(t, "runner-a")
	b.startRunner(t, "runner-b")
	replayed := 0
	for _, id := range jobs {
		job := b.waitFinished(t, id)
		require.Equal(t, replay.JobDone, job.Status)
		require.Zero(t, job.Failed)
		replayed += job.Replayed
	}
	require.Equal(t, len(ids), replayed, "the jobs together replayed every letter once")
	require.Len(t, b.outbox(t), len(ids))
	require.Zero(t, b.count(t, `SELECT count(*) FROM (SELECT headers->>'replay_of' FROM transaction_outbox GROUP BY 1 HAVING count(*) > 1) d`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM dead_letters WHERE replay_count > 1`))
}

func TestRunnerResumesAJobWhoseRunnerDied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := b.mixed(t, 10)
	job, err := b.svc.CreateJob(ctx, "bob", request(8))
	require.NoError(t, err)
	// A worker took the job, replayed the first three letters and died
	// holding it (River rescued its job). (Its replays went through the
	// service, as it would.)
	for _, id := range ids[:3] {
		_, err := b.svc.Replay(ctx, id, "bob", "")
		require.NoError(t, err)
	}
	_, err = b.db.Pool.Exec(ctx, `UPDATE replay_jobs SET status = 'running', started_at = $2, matched = 10, replayed = 3,
		cursor_id = $3, locked_by = 'dead-runner' WHERE id = $1`, job.ID, t0, ids[2])
	require.NoError(t, err)

	b.startRunner(t, "runner-b")
	job = b.waitFinished(t, job.ID)
	require.Equal(t, replay.JobDone, job.Status)
	require.Equal(t, 8, job.Replayed, "five more, up to max")
	require.Equal(t, 10, job.Matched, "kept from the first start")
	require.Len(t, b.outbox(t), 8)
	require.Zero(t, b.count(t, `SELECT count(*) FROM dead_letters WHERE replay_count > 1`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'replay_job_start' AND (detail->>'resumed')::boolean`))
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'open' AND id = ANY($1)`, ids))
}

func TestCancelStopsAJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.mixed(t, 5)
	job, err := b.svc.CreateJob(ctx, "bob", request(5))
	require.NoError(t, err)
	cancelled, err := b.svc.CancelJob(ctx, job.ID, "carol")
	require.NoError(t, err)
	require.Equal(t, replay.JobCancelled, cancelled.Status)
	require.NotNil(t, cancelled.FinishedAt)
	_, err = b.svc.CancelJob(ctx, job.ID, "carol")
	require.ErrorIs(t, err, replay.ErrJobFinished)
	_, err = b.svc.CancelJob(ctx, job.ID+10, "carol")
	require.ErrorIs(t, err, replay.ErrJobNotFound)

	// A runner never picks it up.
	done, err := b.svc.CreateJob(ctx, "bob", replay.BulkRequest{Topic: "aegis.none", Max: 1})
	require.NoError(t, err)
	b.startRunner(t, "runner-a")
	b.waitFinished(t, done.ID)
	require.Empty(t, b.outbox(t))
	jobs, err := b.svc.Jobs(ctx, 10)
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	require.Equal(t, done.ID, jobs[0].ID, "newest first")
	require.Equal(t, replay.JobCancelled, jobs[1].Status)
}

// progress waits until job id has handled at least n letters.
func (b *bundle) progress(t *testing.T, id int64, n int) replay.Job {
	t.Helper()
	var job replay.Job
	require.Eventually(t, func() bool {
		var err error
		job, err = b.svc.Job(context.Background(), id)
		require.NoError(t, err)
		return job.Replayed >= n
	}, waitFor, 5*time.Millisecond)
	return job
}

// noneTwice fails t if a letter was replayed twice.
func (b *bundle) noneTwice(t *testing.T) {
	t.Helper()
	require.Zero(t, b.count(t, `SELECT count(*) FROM (SELECT headers->>'replay_of' FROM transaction_outbox GROUP BY 1 HAVING count(*) > 1) d`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM dead_letters WHERE replay_count > 1`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM (SELECT dead_letter_id FROM replay_job_letters GROUP BY job_id, dead_letter_id HAVING count(*) > 1) d`))
}

// A client stopped in the middle of a job (a replica shutting down) lets go
// of it between two letters; another client finishes it, and no letter is
// replayed twice.
func TestStoppedClientsJobIsFinishedByAnother(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := b.mixed(t, 30)
	job, err := b.svc.CreateJob(ctx, "bob", request(30))
	require.NoError(t, err)
	a := b.runner(t, "runner-a", jobs.Config{ReplayRate: 20})
	b.progress(t, job.ID, 5)
	require.NoError(t, a.Stop(ctx))
	paused, err := b.svc.Job(ctx, job.ID)
	require.NoError(t, err)
	require.Equal(t, replay.JobRunning, paused.Status)
	require.Less(t, paused.Replayed, 30, "stopped mid-job")
	// The River job waits for the next client, snoozed (no attempt spent).
	require.Eventually(t, func() bool {
		return b.count(t, `SELECT count(*) FROM river_job WHERE state IN ('available', 'scheduled') AND attempt = 0 AND args->>'replay_job_id' = $1`, fmt.Sprint(job.ID)) == 1
	}, waitFor, 10*time.Millisecond)

	b.startRunner(t, "runner-b")
	job = b.waitFinished(t, job.ID)
	require.Equal(t, replay.JobDone, job.Status)
	require.Equal(t, len(ids), job.Replayed)
	require.Len(t, b.outbox(t), len(ids))
	b.noneTwice(t)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'replay_job_start'`), "a clean hand-over is no takeover")
	require.Eventually(t, func() bool {
		return b.count(t, `SELECT count(*) FROM river_job WHERE state = 'completed'`) == 1
	}, waitFor, 10*time.Millisecond, "River records the job complete")
}

// A replica that crashed while working a job (its process gone: River's job
// left running, the replay_jobs row held by its token) does not keep the job
// for ever: River's rescuer hands it to a live client once the kind's timeout has
// passed, which finishes it without replaying a letter twice. (A worker
// Timeout of -1 made River skip the job: it stayed running.)
func TestCrashedReplicasJobIsRescued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := b.mixed(t, 10)
	job, err := b.svc.CreateJob(ctx, "bob", request(10))
	require.NoError(t, err)
	for _, id := range ids[:3] {
		_, err := b.svc.Replay(ctx, id, "bob", "")
		require.NoError(t, err)
	}
	_, err = b.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - interval '1 hour',
		attempted_by = '{dead-client}' WHERE args->>'replay_job_id' = $1`, fmt.Sprint(job.ID))
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, `UPDATE replay_jobs SET status = 'running', started_at = $2, matched = 10, replayed = 3,
		cursor_id = $3, locked_by = 'dead-runner' WHERE id = $1`, job.ID, t0, ids[2])
	require.NoError(t, err)

	b.runner(t, "runner-b", jobs.Config{ReplayRate: 2000, ReplaySlice: time.Second, Kinds: jobs.Kinds{ReplayTimeout: 2 * time.Second}})
	job = b.waitFinished(t, job.ID)
	require.Equal(t, replay.JobDone, job.Status)
	require.Equal(t, len(ids), job.Replayed)
	require.Len(t, b.outbox(t), len(ids))
	b.noneTwice(t)
	require.Eventually(t, func() bool {
		return b.count(t, `SELECT count(*) FROM river_job WHERE state = 'completed' AND attempt = 2 AND args->>'replay_job_id' = $1`, fmt.Sprint(job.ID)) == 1
	}, waitFor, 10*time.Millisecond, "River rescued the job (a second attempt) and completed it")
}

// River hands a job whose worker looks dead (its rescuer makes a running job
// available again) to another attempt while the first worker still runs:
// the first one's next letter finds its token replaced and stops, the new
// attempt finishes the job, and no letter is replayed twice.
func TestTakenOverWorkerStopsAtItsNextLetter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := b.mixed(t, 20)
	job, err := b.svc.CreateJob(ctx, "bob", request(20))
	require.NoError(t, err)
	b.runner(t, "runner-a", jobs.Config{ReplayRate: 10})
	b.progress(t, job.ID, 3)
	// What River's rescuer does to a job stuck in running.
	_, err = b.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'available', scheduled_at = now() WHERE state = 'running' AND args->>'replay_job_id' = $1`,
		fmt.Sprint(job.ID))
	require.NoError(t, err)
	b.startRunner(t, "runner-b")

	job = b.waitFinished(t, job.ID)
	require.Equal(t, replay.JobDone, job.Status)
	require.Equal(t, len(ids), job.Replayed)
	require.Len(t, b.outbox(t), len(ids))
	b.noneTwice(t)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'replay_job_start' AND (detail->>'resumed')::boolean`),
		"the takeover is audited")
}

// Cancelling a running job stops its worker at the next letter; River's job
// ends without a retry.
func TestCancelStopsARunningJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.mixed(t, 30)
	job, err := b.svc.CreateJob(ctx, "bob", request(30))
	require.NoError(t, err)
	b.runner(t, "runner-a", jobs.Config{ReplayRate: 20})
	b.progress(t, job.ID, 2)
	_, err = b.svc.CancelJob(ctx, job.ID, "carol")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return b.count(t, `SELECT count(*) FROM river_job WHERE state = 'completed'`) == 1
	}, waitFor, 10*time.Millisecond)
	job, err = b.svc.Job(ctx, job.ID)
	require.NoError(t, err)
	require.Equal(t, replay.JobCancelled, job.Status)
	require.Len(t, b.outbox(t), job.Replayed, "nothing replayed after the cancel")
	require.Less(t, job.Replayed, 30)
}

// Creating a job inserts its River job in the same transaction.
func TestCreateJobQueuesOneRiverJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mixed(t, 2)
	job, err := b.svc.CreateJob(context.Background(), "bob", request(2))
	require.NoError(t, err)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'replay_job' AND queue = 'replay' AND state = 'available' AND (args->>'replay_job_id')::bigint = $1`, job.ID))
}

// A replay job whose River job is gone (discarded after its last attempt,
// or deleted) would stay queued or running for ever with its letters open
// and nothing said: EndOrphanedJobs ends it as failed, says why, audits it.
// A job whose River job is live is left alone, and an ended job is not
// ended twice.
func TestOrphanedJobIsEndedAsFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.mixed(t, 4)
	orphan, err := b.svc.CreateJob(ctx, "bob", request(2))
	require.NoError(t, err)
	live, err := b.svc.CreateJob(ctx, "bob", request(2))
	require.NoError(t, err)
	// As dlq-admin runs it: with its role's grants.
	pool := b.db.As(t, migrations.RoleDLQAdmin)
	sweeper := replay.New(pool, store.New(pool), lifecycle.Deps{Logger: slog.New(slog.DiscardHandler), Clock: func() time.Time { return t0.Add(time.Hour) }})

	ended, err := sweeper.EndOrphanedJobs(ctx)
	require.NoError(t, err)
	require.Empty(t, ended, "both River jobs are available")

	// What River does to a job whose last attempt failed.
	_, err = b.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'discarded', finalized_at = now() WHERE args->>'replay_job_id' = $1`,
		fmt.Sprint(orphan.ID))
	require.NoError(t, err)
	ended, err = sweeper.EndOrphanedJobs(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{orphan.ID}, ended)
	got, err := b.svc.Job(ctx, orphan.ID)
	require.NoError(t, err)
	require.Equal(t, replay.JobFailed, got.Status)
	require.NotNil(t, got.LastError)
	require.Contains(t, *got.LastError, "River job ended without finishing it")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'replay_job_cancel' AND actor = $1 AND target_id = $2`,
		replay.OrphanActor, fmt.Sprint(orphan.ID)))
	got, err = b.svc.Job(ctx, live.ID)
	require.NoError(t, err)
	require.Equal(t, replay.JobQueued, got.Status, "its River job is live")

	ended, err = sweeper.EndOrphanedJobs(ctx)
	require.NoError(t, err)
	require.Empty(t, ended, "ended once")

	// A River job deleted (River's cleaner, an operator) orphans it too;
	// the watcher counts it for AegisReplayJobAbandoned.
	_, err = b.db.Pool.Exec(ctx, `DELETE FROM river_job WHERE args->>'replay_job_id' = $1`, fmt.Sprint(live.ID))
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	w, err := replay.NewOrphanWatcher(sweeper, time.Minute, reg)
	require.NoError(t, err)
	n, err := w.Check(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, promtest.GatherAndCompare(reg, strings.NewReader(`
# HELP aegis_replay_jobs_abandoned_total Replay jobs ended as failed because their River job was gone (attempts spent, cancelled or deleted).
# TYPE aegis_replay_jobs_abandoned_total counter
aegis_replay_jobs_abandoned_total 1
`), "aegis_replay_jobs_abandoned_total"))
	got, err = b.svc.Job(ctx, live.ID)
	require.NoError(t, err)
	require.Equal(t, replay.JobFailed, got.Status)
}
