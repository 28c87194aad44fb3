// Package outbox is the transactional outbox: the one place that reads and
// writes transaction_outbox.
//
// Writers call Insert with their own pgx.Tx, so the message commits or rolls
// back with the business change it announces; nothing is published that did
// not happen, and nothing that happened goes unpublished. The relay claims
// due rows with Claim and settles them with DeletePublished (a published row
// is deleted at once: nothing reads it again), Retry or MarkDeadLetter (the
// row stays, settled dlq, beside its dead letter).
//
// Ordering. Ids from a sequence are not commit order: a transaction can take
// id 10, stall, and commit after the one that took id 11 (watermill #311). For
// rows of one partition key that would publish a wallet's events out of
// order. Insert and Queue therefore take a transaction-scoped advisory lock
// on each partition key before they draw an id (all keys of a write in one
// statement, in hash order, so two writers cannot deadlock): two
// transactions writing the same key serialize, so within a key id order is
// commit order. The lock is held only
// until the writer commits and only contends between writes for the same
// wallet. Claim then hands out a key's rows strictly in id order and never
// while an earlier row of that key is unfinished outside the claim (in
// flight, or failed and waiting for its retry), so a failing row holds back
// the later rows of its key and nothing else. One claim may take a run of a
// key's consecutive due rows (a hot key drains a batch per cycle, not a row):
// the relay produces them in order and hands back the rows behind one that
// failed. A claim's cost is bounded by its batch, not by the backlog: it
// looks for heads in a window of the backlog (ClaimWindow rows from the
// claimer's Cursor, which moves on past a window that yielded less than a
// batch and wraps at the end, so a window of blocked keys delays the keys
// behind it by a claim, never stops them), and shares the room the heads
// leave among the keys with rows behind their heads.
//
// The key is therefore the unit of order, and a writer chooses it by what
// must wait for what: a row that must not hold back the rows of its
// subject (a delayed retry of one command among a wallet's many: its
// NotBefore would hold back every later row of the key) is written under
// a key of its own, and the reasons it needs no order with them are the
// writer's to state.
//
// # Where its SQL lives
//
// queries.sql, compiled by sqlc into package sqlcdb (sqlc.yaml): the relay's
// statements (Claim, DeletePublished, Retry, Release, MarkDeadLetter,
// PurgeProcessed, Stats) run through the generated methods, one round trip
// each. LockKeys, InsertMessages and Notify are queued into the caller's
// own pgx.Batch — Queue and QueueNotify exist so a writer's outbox rows, key
// locks and NOTIFY ride in the round trip of its own transaction, which a
// generated method (or sqlc's :batchexec, which sends a batch of its own)
// cannot join. LockKeys and Notify go through database.Queue, as every
// pipelined statement does; InsertMessages alone is queued by its exported
// text (emit_exported_queries), because it takes NULL elements (a message
// without its own retry bound or start), which its generated parameter
// types cannot carry. A COPY
// (:copyfrom) is no alternative: it cannot return the ids nor share the
// batch.
package outbox
