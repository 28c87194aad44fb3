// Package jobs builds the suite's River clients (riverqueue/river on
// riverpgxv5, in the service's own Postgres) one way: the one background
// job mechanism of every service that has background jobs
// (docs/design/architecture.md, "Background jobs").
//
// A service registers its own workers, queues and schedules in a Config
// and gets a Runner, a lifecycle.Component: Start starts River and the
// schedules; Stop first stops the schedules, then calls Config.OnStop (a service's workers use it to put their job
// down at a safe point: a replay between two letters, a PSP reconciliation
// at once, each snoozing its job for the next client), then stops River
// gracefully; when Stop's context ends first, it cancels the jobs still
// running and waits for River's goroutines, so that none outlives the
// component. InsertOnly is a client that queues jobs and works none: for a
// process whose jobs another service works (dlq-admin queues the PSP
// reconciliation that webhook-api works).
//
// What every client shares: River logs through the service's slog logger;
// the reindexer is off (REINDEX needs the indexes' owner, the migrator, and
// the services' roles have DML only: migrations 000017 and 000018); River's
// default retry policy (none is set).
//
// Every client knows every job kind of the schema (Kinds). River's rescuer
// runs on the schema's leader only, whichever service's client that is, and
// judges a stuck job by the leader's worker for its kind: without one it
// discards the job; with one, it leaves the job alone within the worker's
// Timeout and retries it after (attempts left). So each kind is declared
// here once, with its queue and timeout; the services' workers take their
// Timeout from Kinds, and New registers, for every kind of a queue the
// client does not work, a stand-in worker with the kind's timeout and
// River's default retry, whose Work fails (it is never handed a job: the
// client does not fetch that queue). The rescue horizon is the shortest
// timeout (Kinds.RescueAfter): a job is rescued once its own kind's timeout
// has passed, and not before, whichever client leads. Every client must be
// given the same Kinds (only the PSP run's timeout is a setting,
// PSP_RECONCILE_RUN_TIMEOUT, read by both services). A worker whose kind is
// not declared (tests') gets the horizon as its timeout; River never
// rescues the job of a worker whose Timeout is negative, so none is.
//
// Schedules (Schedule) are periodic jobs that run whichever River client
// leads. River elects one leader per schema (river_leader has one row) and
// only the leader inserts periodic jobs, only those of its own client;
// webhook-api and dlq-admin share the schema, so River's periodic jobs
// would run only for the service that won the election. Instead every
// replica of the service that owns a schedule inserts its job at the start
// of each period (UTC multiples of Schedule.Interval, and at the runner's
// start with RunOnStart), unique per period (River's UniqueOpts.ByPeriod,
// set here, with River's default states, completed included): a period
// gets one job however many replicas insert it. A failed insert is logged
// and tried again within the period; the other replicas insert it too.
// Config takes no river.PeriodicJob, so none can reach the leader-only
// enqueuer again.
//
// Job kinds that cross services (inserted by one, worked by another) are
// declared here with their args so both sides agree on the kind, the queue
// and the args' JSON: PSPReconcileArgs.
package jobs
