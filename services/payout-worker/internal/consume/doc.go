// Package consume runs the payout worker's Kafka consumer group and decides
// when an offset may be committed: only after the record's effect committed
// in Postgres, or the record was handed to the retry path (an outbox row with
// next_retry_at) or the dead-letter path. It never sleeps on a partition to
// retry business work; the handler schedules retries through the outbox; it
// sleeps only on infrastructure failures, and only for a bounded time.
//
// What the handler returns decides the rest:
//   - nil: done, the offset may move.
//   - a Poison error: the record cannot be decoded; it is published to
//     <topic>.dlq as it came, with the reason, and the offset moves.
//   - a Permanent error, or a Postgres error whose SQLSTATE says the same
//     statement refuses the same data every time (a value out of range, a
//     check violation, a state transition the state machine refuses), or a
//     panic in the handler: dead-lettered at once with the error and class,
//     the offset moves. One bad message never stops the others: retried
//     in place, a credit Postgres refuses every time (an overflowing
//     balance) would hold every partition of the worker behind it.
//   - a Transient error: nothing was committed (Postgres or Redis is down, a
//     serialization failure, a deadlock); the same record is retried in
//     place with backoff, because with the database down there is no outbox
//     to defer through either. The retries are bounded
//     (RetryInPlaceAttempts, RetryInPlaceFor); past the bound the record is
//     dead-lettered with class transient and its attempt history, from where
//     an operator replays it. An error nobody classified is transient.
//   - context cancellation: the worker is stopping; the record stays
//     uncommitted and is redelivered to whoever owns the partition next.
//     (Cancellation while the worker runs — a lost wallet lock — is
//     transient.) A record left undone while the worker keeps running (its
//     dead letter could not be published within the bound) rewinds its
//     partition so that the next poll delivers it again.
//
// See classify.go for the exact rules.
//
// Records of one key are handled in order; different keys — across
// partitions and within one — run concurrently (Concurrency at a time),
// because a wallet's events share a key and nothing orders two wallets. A
// partition's offset is committed up to the last record of its done prefix.
// The consumer keeps polling while records are in flight (window.go): a
// record polled later starts as soon as its key and a slot are free, so one
// slow record (a PSP call, a lock wait) holds back its key and its
// partition's commit, not every record polled after it. Rebalances are
// blocked for a window of at most two seconds while records are in flight
// (BlockRebalanceOnPoll); the window ends by finishing them and committing,
// so offsets are committed before partitions are released and a rebalance
// neither loses nor re-applies work (re-delivery is still possible after a
// crash; handlers are idempotent through processed_events).
package consume
