// Package consumer runs one Kafka consumer group over a handler and decides
// when an offset may be committed: only after the handler's effect is
// durable (the handler returned nil) or the record was given up on and its
// dead letter written. It is the one consumer-group loop of Aegis: every
// service that consumes a topic runs it with its own handler and options.
//
// What the handler returns, as Config.Classify reads it (Classify by
// default), decides the rest:
//   - nil: done, the offset may move.
//   - Poison or Permanent (a panic in the handler is permanent): the record
//     is dead-lettered at once through Deps.DeadLetters, and the offset
//     moves. One bad record never stops the others.
//   - Transient: nothing was decided; the same record is retried in place
//     with Config.Backoff, bounded by Config.RetryAttempts and
//     Config.RetryFor (whichever ends first). Past the bound it is
//     dead-lettered with class transient and its attempt history.
//   - Canceled (the loop is stopping): the record stays uncommitted and is
//     redelivered to whoever owns the partition next.
//
// A record whose dead letter cannot be written within the same bound, or
// that must be given up on while no dead-letter path is configured, is left
// undone: its partition is rewound to it, so the next poll delivers it
// again, and nothing after it on its partition is committed. A panic in the
// handler never ends the loop: it is recovered, counted and logged
// (pkg/panics), and the record it held is dead-lettered or left undone.
//
// Order: with PerKey (the default) records of one key are handled one at a
// time, in the order polled, across topics and partitions too (a user's
// credit and the payout command accepted after it are on two topics: never
// at once), and different keys, across partitions and within one, run
// concurrently. Within a partition the order polled is the log's order;
// across partitions it is the fetch's, which a rewind can change, so no
// order across partitions is promised
// (Config.Concurrency at a time); with PerPartition a partition's records
// are handled one at a time, in order, and partitions run concurrently. A
// partition's offset is committed up to the last record of its done prefix.
//
// Rebalances: the client blocks rebalances while records are polled and in
// flight (ClientOpts: BlockRebalanceOnPoll). The loop keeps polling for at
// most Config.Window while records are in flight, then stops polling, lets
// the records polled so far finish (with Config.LeaveQueued only those
// already started), commits every done prefix, rewinds the partitions of
// undone records and only then allows the rebalance. A
// partition is therefore revoked with its finished work committed and its
// unfinished work uncommitted: nothing is lost. A rewind redelivers the
// records after an undone one that were already done, and a crash
// redelivers what was not committed, so handlers must be idempotent.
//
// On shutdown the records in flight may finish within Config.Grace; what
// finished is committed before Run returns.
package consumer
