// Package consume runs the payout worker's handler over its consumer group
// on pkg/consumer, the one consumer-group loop: an offset is committed only
// after the record's effect committed in Postgres, or the record was handed
// to the retry path (an outbox row with next_retry_at) or the dead-letter
// path. It never sleeps on a partition to retry business work; the handler
// schedules retries through the outbox; it retries in place only on
// infrastructure failures, and only for a bounded time.
//
// What it sets on the loop:
//   - Order per key: a wallet's events share a key and are handled in
//     order; nothing orders two wallets, so different keys run
//     concurrently (Config.Concurrency).
//   - Classification by consumer.Classify: a Poison or Permanent error, a
//     Postgres refusal that refuses the same data every time, or a panic in
//     the handler is dead-lettered at once; a transient failure (Postgres
//     or Redis down, a serialization failure, an unclassified error) is
//     retried in place within Config.RetryInPlaceAttempts and
//     RetryInPlaceFor and then dead-lettered with class transient and its
//     attempt history, from where an operator replays it. One bad message
//     never stops the others.
//   - Dead letters published to <topic>.dlq (consumer.Publish), because
//     Postgres may be what failed; dlq-admin stores them. A dead letter
//     Kafka will not take within the bound leaves its record undone: the
//     partition is rewound and the record comes back.
//   - Rebalances wait for the records in flight (at most about two seconds
//     of polling plus the records themselves) and their commit, so a
//     rebalance neither loses nor re-applies work; after a crash records
//     may be redelivered, and handlers are idempotent through
//     processed_events.
//
// A build with -tags chaos can plant the defect of retrying Postgres
// refusals in place for ever (plant_chaos.go); no other build contains it.
package consume
