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
//     are sent one at a time, in order. Partitions are sent concurrently,
//     so one user's slow receiver answer holds only its own partition.
//   - Bounded retry: a timeout, a network error, 408, 429 or 5xx is retried
//     in place with exponential backoff and full jitter (pkg/backoff) up to
//     SETTLEMENT_WEBHOOK_MAX_ATTEMPTS attempts in all; any other answer
//     outside 2xx (a 4xx, a redirect) is permanent at once. Either way the
//     event then becomes a dead letter in dead_letters (source consumer,
//     original topic aegis.settlements, this group, class permanent or
//     retries_exhausted) with every attempt; ops see it with the others and
//     its alert, and a replay sends it again with the same event id. The
//     partition moves on: one bad event or receiver never blocks the others
//     for longer than the retry budget.
//   - Only the contract is sent: a body that does not match the schema is
//     dead-lettered, never delivered.
//   - An event is committed only after it was delivered or its dead letter
//     stored. A dead letter Postgres cannot store is retried within the same
//     budget; past it an alert says so and the event is left uncommitted,
//     its partition rewound: it is polled again, never committed without
//     its letter.
//
// The loop is pkg/consumer's (PerPartition, one partition per slot):
// rebalances wait for the events in hand for at most Config.BatchFor (30s);
// then only the events already started finish, the rest is rewound and
// polled again, so a receiver that is down paces the stream without
// pinning partitions to a replica. On shutdown the events in flight are
// abandoned at once, uncommitted, and redelivered by the next member.
package deliver
