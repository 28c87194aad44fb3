package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/aegis-payments/aegis/pkg/config"
)

// The job kinds of the suite's River schema (river_job.kind). webhook-api
// and dlq-admin share the schema, and River's rescuer runs only on the
// schema's leader, whichever service's client it is: it judges every job by
// the leader's worker for the job's kind. So every kind is declared here,
// with its queue and timeout (Kinds), and every client knows every kind:
// its own workers, and a stand-in for each kind of a queue it does not work
// (New).
const (
	// KindReplay is dlq-admin's bulk replay (queue ReplayQueue).
	KindReplay = "replay_job"
	// KindLedgerCheck is dlq-admin's scheduled ledger integrity check
	// (queue LedgerCheckQueue).
	KindLedgerCheck = "reconcile"
	// KindPSPRun is one PSP reconciliation run, worked by webhook-api
	// (PSPReconcileArgs, queue PSPReconcileQueue).
	KindPSPRun = "psp_reconcile"
	// KindPSPSchedule is webhook-api's scheduled request of a PSP
	// reconciliation run (queue PSPReconcileQueue).
	KindPSPSchedule = "psp_reconcile_scheduled"
)

// Queues of the kinds above.
const (
	// ReplayQueue is dlq-admin's queue of bulk replays.
	ReplayQueue = "replay"
	// LedgerCheckQueue is dlq-admin's queue of scheduled ledger checks.
	LedgerCheckQueue = "reconcile"
)

// Default timeouts (Kinds).
const (
	// DefaultReplayTimeout bounds one work call of a replay job (a slice,
	// replay.DefaultSlice, is far shorter: the worker snoozes its job after
	// each).
	DefaultReplayTimeout = 5 * time.Minute
	// DefaultLedgerCheckTimeout bounds one scheduled ledger check: a few
	// statements, each bounded by RECONCILE_STATEMENT_TIMEOUT.
	DefaultLedgerCheckTimeout = time.Hour
	// DefaultPSPRunTimeout bounds one PSP reconciliation attempt:
	// PSP_RECONCILE_RUN_TIMEOUT's default.
	DefaultPSPRunTimeout = config.PSPReconcileRunLimit
	// DefaultPSPScheduleTimeout bounds the scheduled request of a run (two
	// short transactions).
	DefaultPSPScheduleTimeout = 5 * time.Minute
)

// Kinds is every job kind's timeout: how long one attempt may run before
// River cancels it, and how long after it started River's rescuer takes its
// worker for dead and retries it (if attempts remain; River's default
// backoff, the same on every client: none sets a retry policy and no worker
// overrides NextRetry). Every River client of the suite must be given the
// same Kinds (a zero field takes its default): the leader's decide for
// every service's jobs. Only the PSP run's is a setting
// (PSP_RECONCILE_RUN_TIMEOUT, read by both services from the one
// configuration every service reads); tests shorten the others.
type Kinds struct {
	ReplayTimeout      time.Duration
	LedgerCheckTimeout time.Duration
	PSPRunTimeout      time.Duration
	PSPScheduleTimeout time.Duration
}

// WithDefaults fills the zero fields.
func (k Kinds) WithDefaults() Kinds {
	if k.ReplayTimeout == 0 {
		k.ReplayTimeout = DefaultReplayTimeout
	}
	if k.LedgerCheckTimeout == 0 {
		k.LedgerCheckTimeout = DefaultLedgerCheckTimeout
	}
	if k.PSPRunTimeout == 0 {
		k.PSPRunTimeout = DefaultPSPRunTimeout
	}
	if k.PSPScheduleTimeout == 0 {
		k.PSPScheduleTimeout = DefaultPSPScheduleTimeout
	}
	return k
}

// Validate reports timeouts that cannot work: River never rescues the job
// of a worker whose timeout is negative.
func (k Kinds) Validate() error {
	var errs []error
	for _, c := range k.contracts() {
		if c.timeout < time.Second {
			errs = append(errs, config.Invalid("Kinds."+c.field, "must be at least 1s"))
		}
	}
	return errors.Join(errs...)
}

// RescueAfter is the suite's rescue horizon (River's RescueStuckJobsAfter):
// the shortest timeout. River's rescuer looks only at jobs running for
// longer than it, then leaves alone a job still within its kind's timeout:
// with the horizon no longer than any timeout, every job is rescued once
// its own timeout has passed, and not before, whichever client leads.
func (k Kinds) RescueAfter() time.Duration {
	k = k.WithDefaults()
	least := k.ReplayTimeout
	for _, c := range k.contracts() {
		least = min(least, c.timeout)
	}
	return least
}

// contract is one kind's queue and timeout, and the stand-in registered on
// a client that does not work its queue.
type contract struct {
	kind, queue, field string
	timeout            time.Duration
	standIn            func(*river.Workers, time.Duration) error
}

func (k Kinds) contracts() []contract {
	return []contract{
		{KindReplay, ReplayQueue, "ReplayTimeout", k.ReplayTimeout, addStandIn[replayStandIn]},
		{KindLedgerCheck, LedgerCheckQueue, "LedgerCheckTimeout", k.LedgerCheckTimeout, addStandIn[ledgerCheckStandIn]},
		{KindPSPRun, PSPReconcileQueue, "PSPRunTimeout", k.PSPRunTimeout, addStandIn[pspRunStandIn]},
		{KindPSPSchedule, PSPReconcileQueue, "PSPScheduleTimeout", k.PSPScheduleTimeout, addStandIn[pspScheduleStandIn]},
	}
}

// addStandIns registers a stand-in worker for every kind whose queue the
// client does not work.
func (k Kinds) addStandIns(workers *river.Workers, queues map[string]river.QueueConfig) error {
	for _, c := range k.contracts() {
		if _, ok := queues[c.queue]; ok {
			continue // the service's own kind: its worker is registered
		}
		if err := c.standIn(workers, c.timeout); err != nil {
			return fmt.Errorf("stand-in for job kind %s (queue %s, not worked here): %w", c.kind, c.queue, err)
		}
	}
	return nil
}

// The stand-ins' args: River names a worker's kind by its args type. Their
// fields are not read (JSON's unknown fields are ignored).
type (
	replayStandIn      struct{}
	ledgerCheckStandIn struct{}
	pspRunStandIn      struct{}
	pspScheduleStandIn struct{}
)

func (replayStandIn) Kind() string      { return KindReplay }
func (ledgerCheckStandIn) Kind() string { return KindLedgerCheck }
func (pspRunStandIn) Kind() string      { return KindPSPRun }
func (pspScheduleStandIn) Kind() string { return KindPSPSchedule }

// errNotWorkedHere is what a stand-in returns if it is ever handed a job.
var errNotWorkedHere = errors.New("job kind not worked by this service (its queue is another service's)")

// standIn is the worker of another service's kind on this client: it gives
// River's rescuer, when this client leads, the kind's timeout (and River's
// default retry), so that a job of that kind is judged as its own
// service's client would judge it. It never works a job: the client does
// not fetch the kind's queue, and if it were handed one it fails it, so
// River retries it (never a silent success).
type standIn[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	timeout time.Duration
}

func (w *standIn[T]) Timeout(*river.Job[T]) time.Duration { return w.timeout }

func (w *standIn[T]) Work(_ context.Context, j *river.Job[T]) error {
	return fmt.Errorf("river job %d (%s, queue %s): %w", j.ID, j.Kind, j.Queue, errNotWorkedHere)
}

func addStandIn[T river.JobArgs](workers *river.Workers, timeout time.Duration) error {
	return river.AddWorkerSafely[T](workers, &standIn[T]{timeout: timeout})
}
