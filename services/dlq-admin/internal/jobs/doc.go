// Package jobs is dlq-admin's background job runner: one River client
// (riverqueue/river on riverpgxv5, in the service's own Postgres, built by
// pkg/jobs as webhook-api's is) that works bulk replay jobs (package
// replay's Worker, queue "replay") and the scheduled reconciliation
// (package recon's Schedule, queue "reconcile"). The PSP reconciliation
// is River's too, but webhook-api works it (its pspsync); dlq-admin only
// queues it (package pspruns, with an insert-only client).
//
// Why River rather than a loop of our own: a replay job needs a lease that
// outlives a crashed worker, and the reconciliation must run once per
// period however many replicas run (a timer per replica would run it N
// times). River brings the leases (rescue of a crashed worker's job), retries with
// backoff and uniqueness (one River job per replay job; one reconciliation
// per period across replicas: every replica inserts it, unique per period,
// pkg/jobs' Schedule, not River's leader-only periodic jobs, since the
// leader of the shared River schema may be webhook-api's client),
// tested by others; a job is inserted in the transaction that creates its
// operator-facing row (InsertTx), so neither exists without the other.
// docs/design/architecture.md ("Background jobs") records the decision, and what
// stays custom: the outbox relay (per-key order and Kafka publishing are its
// job) and the consumers.
//
// Runner is a lifecycle.Component. Stop first tells the replay workers to
// stop between two letters (they snooze their job, which River hands to the
// next client at once), then stops River gracefully; when Stop's context
// ends first, it cancels the jobs still running and waits for River's
// goroutines, so that none outlives the component.
package jobs
