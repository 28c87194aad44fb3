// Package ingest turns a verified PSP webhook into one provider-neutral
// envelope (event.PSPEvent) and commits it: the inbox row in webhook_events
// and its outbox row in one transaction, so the PSP's 200 means the event is
// durable and will reach Kafka.
//
// Guarantees:
//   - A duplicate (same provider and event id) commits nothing new and is
//     acknowledged again; this is also Paystack's only replay protection.
//     webhook_events is partitioned by day on received_at (the store's
//     clock), so the key is unique only within a partition: its BEFORE
//     INSERT trigger (migration 000056) records the key in
//     webhook_event_keys, under a real primary key, and skips the row as ON
//     CONFLICT DO NOTHING would when the key is there and within the dedupe
//     horizon (partition_policies, 7 days; Stripe retries for 3); a
//     concurrent insert of the key waits on its index entry. The multi-row
//     insert turns a skipped row into the unique violation this package
//     takes for a duplicate there (docs/design/data-lifecycle.md).
//   - A webhook whose day has no partition fails (database.NoPartition) and
//     is answered 503: nothing is stored and the PSP retries it.
//   - An event we act on that lacks what we need (a payment without
//     metadata.user_id) is stored and goes straight to the dead-letter store
//     with the reason, in the same transaction: never silently dropped, never a
//     5xx that would make the PSP retry forever.
//   - An event type we do not act on is stored and published with action
//     "none".
//   - An event that can never be stored as sent (a user_id longer than
//     event.MaxUserID, an identifier over 255 bytes, NUL or invalid UTF-8,
//     JSON jsonb refuses) is answered 200 "dead_lettered": its inbox row
//     keeps what can be stored (the body, or a note with its digest; an
//     unstorable event id is replaced by its sha256, so the PSP's retries
//     still deduplicate), and its body goes byte for byte into the
//     dead-letter store (payload_format psp_webhook, not replayable) in the
//     same transaction. It is never published, so it moves no money until a
//     person settles it with the PSP. checkStorable catches what it can
//     before the transaction; Postgres refusing the data (22, 23 other than
//     duplicates and a row with no partition, 54) is the safety net, taken when such a webhook is alone
//     in its transaction (the Committer retries a failed group one by one).
//     A connection or serialization failure stays a 503 the PSP retries.
//   - A Stripe event created later than now plus the signature tolerance is
//     refused like a stale signature (ErrFromTheFuture): kept, it would make
//     every real event about its object look stale.
//
// Stale events. psp_objects keeps the newest occurred_at seen per PSP
// object; an event older than that is stored and published for the record,
// answered "stale" and flagged stale in its envelope. Within one group the
// newest event of an object wins, as it would one transaction apart.
// Payout outcomes (payout.paid/failed, transfer.*) are not tracked there
// and never answered stale: ingest cannot tell a genuine event from a
// signed one that does not match its payout, which the worker refuses, and
// one such event dated ahead would make the genuine one that follows look
// stale forever. The worker orders them against the latest event it
// applied to the payout.
//
// Group commit. A Committer gathers the webhooks that arrive while the
// previous group is committing into one transaction (credits and events we
// do not act on: one round trip of four statements whatever the group's
// size); each request is answered only after its own group committed.
//
// Admission control. In front of the group commit is a line bounded by
// time: a webhook is admitted when the commits ahead of it and its own, at
// the measured time per commit, fit in QueueBudget, and none is while every
// committer has been stuck in one commit for four budgets (a stall); a
// count bound — what the committers commit in QueueBudget at their rate
// measured on full groups, at least one full group per committer — stays
// as a cap. Counting alone was not enough: when Postgres slows down, the
// rate measured earlier lets in more than the budget's worth. A webhook that finds no room is
// refused at once with ErrOverloaded (the API answers 503 with Retry-After
// before reading the body) and nothing is stored: under overload the
// accepted webhooks wait about QueueBudget instead of every request waiting
// longer and longer until clients time out, and the PSP retries the rest.
//
// SQL. The statements are in queries.sql, compiled by sqlc into sqlcdb
// against the migrations' schema. Each is sent inside a pipelined
// transaction (pgx.Batch), which sqlc's generated methods cannot join (they
// run their statement at once, or send a batch of their own): queue
// (pipeline.go) calls the generated method on a recorder and queues the
// statement it was given, text and argument order from the generated code,
// so a group stays one round trip (two on the general path). The group's
// multi-row insert is sqlc's too: its unnest of eleven arrays is written as
// ROWS FROM (unnest(…), …), which Postgres treats the same and sqlc can
// type (sqlc does not know multi-argument unnest). pkg/outbox's rows and
// pkg/dlq's letters are queued by those packages.
//
// Stripe sends charge.succeeded and payment_intent.succeeded for one payment;
// both carry the PaymentIntent id as their Reference, which the ledger keys
// credits on, so a payment is credited once. A charge that is only authorised
// (captured=false) credits nothing.
package ingest
