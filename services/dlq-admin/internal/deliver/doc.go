// Package deliver sends every event on aegis.settlements (payout outcomes,
// refund and dispute postings; schema pkg/event/schema/settlements/v1) to
// the platform as a signed outbound webhook: POST SETTLEMENT_WEBHOOK_URL
// with the event as body. It is off unless that variable is set.
//
// It lives in dlq-admin because dlq-admin already runs Kafka consumer
// groups and owns the dead-letter store its failures end in; the fixed
// layout has no room for a new service, and payout-worker, the producer,
// must not wait on a receiver.
//
// The promises it keeps:
//
//   - Signed: Aegis-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of
//     "<t>.<body>" under SETTLEMENT_WEBHOOK_SECRET>. A receiver recomputes
//     it, compares in constant time and refuses a t outside its tolerance
//     (Verify is the reference). Aegis-Event-Id is the event's stable id,
//     the same on every retry, redelivery and replay: receivers dedupe on
//     it, because delivery is at least once.
//   - Per-user order: the topic is keyed by user id; a partition's events
//     are sent one at a time, in order. Partitions of one poll are sent
//     concurrently, so one user's slow receiver answer holds only its own
//     partition.
//   - Bounded retry: a timeout, a network error, 408, 429 or 5xx is retried
//     with exponential backoff and full jitter (pkg/backoff) up to
//     SETTLEMENT_WEBHOOK_MAX_ATTEMPTS; any other answer outside 2xx (a 4xx,
//     a redirect) is permanent at once. Either way the event then becomes
//     a dead letter in dead_letters (source consumer, original topic
//     aegis.settlements, this group) with every attempt, ops see it with
//     the others and its alert, and a replay sends it again with the same
//     event id. The partition moves on: one bad event or receiver never
//     blocks the others for longer than the retry budget.
//   - Only the contract is sent: a body that does not match the schema is
//     dead-lettered, never delivered.
//   - Offsets are committed by hand after an event is delivered or
//     dead-lettered; rebalances wait for the batch in hand, but only for
//     Config.BatchFor (30s): then the events not started are rewound and
//     polled again, so a receiver that is down paces the stream without
//     pinning partitions to a replica. On shutdown the event in flight is
//     abandoned uncommitted and redelivered by the next member.
package deliver
