// Package replay resolves dead letters: it puts one back through the
// pipeline (replay), closes one for good (discard), and runs bulk replays as
// tracked, throttled jobs. It keeps the half of the third promise
// (docs/design/architecture.md, "Promises") that comes after "a person can
// see it": the fix is applied once.
//
// One replay is one Postgres transaction: the letter is locked (FOR
// UPDATE), refused unless open, written to transaction_outbox through
// pkg/outbox (the relay publishes it; nothing here talks to Kafka), marked
// replayed with who, when and the outbox row, and recorded in audit_log. So
// a replay either happened entirely or not at all, and a second replay of
// the same letter finds it resolved and is refused.
//
// The outbox row carries the letter's original topic, partition key, event
// type, payload and headers, plus replay_of (the letter id) and
// replay_count. Letters from a consumer also get a new message_id,
// "<original>:replay:<letter id>:<replay count>": the consumer recorded the
// original id in processed_events when it gave up, so a replay under the
// same id would be skipped. Business effects stay idempotent below that
// (the ledger's unique references, the payout state machine), which is why
// replaying something that did succeed changes nothing. Relay and ingest
// letters keep their message_id: no consumer ever applied them. Refused as
// not replayable, changing nothing: a payload that is not JSON (a poison
// message: it cannot go through the jsonb outbox), a letter whose original
// topic is not one of the contract's (kafkax.AllTopics; a .dlq record's
// headers name the topic, and a replay must not publish wherever a record
// says), and a PSP webhook dead-lettered at ingest as it was received
// (dlq.PayloadPSPWebhook: it is not a message of its topic, and what it
// needs is a person checking the PSP's record).
//
// A replay says what it did (store.OutcomeRepublished or OutcomeNoop, kept
// on the letter and in its audit record), decided in its transaction by
// looking at what the letter is about (subject.go): a payout command whose
// payout is SUCCEEDED, FAILED or FINALIZED, or at the PSP (SENT_TO_GATEWAY,
// AWAITING_RESPONSE), is read in the payouts table (the payload carries
// payout_id): payout-worker ignores commands for such a payout, so
// republishing it would look like a fix and do nothing. A command of a payout in
// NEEDS_REVIEW is a no-op too (subject state SUPERSEDED) when a newer
// letter of that payout's commands exists: each replay resumes the payout
// and a resume refused again parks it with a new letter, so replaying every
// letter of a payout (its retries lost, then its deadline's escalation)
// would send it once per letter and leave one open letter per replay; only
// the newest resumes it. A PSP outcome event
// already applied to its payout (payout_evidence, verdict applied) and a
// payment whose credit is already posted (ledger_transactions, kind credit,
// reference "<provider>:<reference>") are final the same way. Then nothing
// is published and the letter is closed as replayed with outcome noop and
// the subject's state. Reading those rows without a lock is enough: the
// states that make a replay a no-op are left only through PSP evidence,
// never through a replayed message, so the answer cannot turn wrong under a
// race. When the subject cannot be read (no payout_id, no such payout, a
// payload of another shape) the letter is republished and the consumers'
// idempotency decides. A republished message that fails again
// becomes a new letter carrying the replay_of header, which the replayed
// letter's detail lists (store.DeadLetter.FailedAgainAs).
//
// A discard (one letter, or in bulk; the REST API, the console and
// aegisctl all come here) is refused, discarding nothing, while a letter it
// would close is about a payout that still holds money: not SUCCEEDED or
// FINALIZED, its hold posted and neither settled nor released
// (ErrHoldsMoney, 409 holds_money). A discarded payout command is never
// applied, so its hold would wait with nobody asked; once the payout is
// resolved (or if it never held anything) its letters may go.
//
// Bulk replay creates a replay_jobs row (the operator's record: progress,
// counts, cancel) and, in the same transaction, the River job that works it
// (JobArgs, queue "replay"; package jobs runs the River client). Worker does
// the work. What a job did with each letter (republished, noop,
// not_replayable, skipped) is a replay_job_letters row written with its
// progress, so the console can show a job letter by letter.
// With a second approver required, a bulk replay of more than
// SECOND_APPROVER_THRESHOLD letters is held at the approval gate with its
// request (HoldBulk); this package owns those requests, and approving one
// creates its job in the transaction that records the approval.
//
// River owns scheduling, retries (a Postgres error: backoff) and the rescue
// of a job whose worker died, once the kind's timeout (pkg/jobs
// Kinds.ReplayTimeout, 5 minutes) has passed, by whichever River client
// leads the schema (webhook-api's knows the kind too); a job whose River
// job is gone (attempts spent, cancelled, deleted) is ended as failed by
// EndOrphanedJobs rather than left running for ever. A work call replays for one slice
// (WorkerConfig.Slice) and snoozes the job, so River hears of it often and
// shutdown waits a slice at most (a stopping worker snoozes at the next
// letter). What makes a replay happen once is ours, not River's: each work
// call takes the job with a fencing token (replay_jobs.locked_by, unique per
// call), and each letter is its own transaction through the same code as a
// single replay that also advances the job's counts and cursor and matches
// only while the token still holds the running job. A worker whose job River
// handed to another attempt (rescued as stuck while it was in fact alive),
// or that an operator cancelled, replays nothing more for it: its next
// letter's transaction rolls back. Letters are replayed only while open, so
// nothing is replayed twice, and a job only considers letters that existed
// when it was created, so a replay that fails again (a new letter) is not
// chased by the job that replayed it. Workers are throttled (REPLAY_RATE
// letters per second per job) so a bulk replay cannot flood Kafka or the
// consumers.
package replay
