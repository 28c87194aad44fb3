// Package deliver is outbound delivery (docs/design/outbound.md): every
// event on aegis.settlements is delivered to the platform's endpoints as a
// Standard Webhooks request, retried on a persisted schedule (about 27 h
// by default), every attempt logged. It runs in outbox-relay, the service
// whose job is "committed in Aegis, leaves Aegis".
//
// The promises it keeps, and why:
//
//   - Nothing is lost between Kafka and Postgres. The intake (consumer
//     group OUTBOUND_GROUP, pkg/consumer) stores each record in one
//     transaction, committed durably (synchronous_commit on, although the
//     relay's pool runs with it off) before the record's offset may move: a
//     new event_id gets the user's next sequence number, its message (the
//     event plus "sequence") and one pending delivery per enabled,
//     undeleted endpoint whose type filter wants it; a known event_id
//     changes nothing (a redelivery, a replay); a body that is not a
//     settlements event (JSON Schema) is a dead letter and nothing else.
//   - Sequence numbers follow topic order per user: the topic is keyed by
//     user and the intake handles one key's records one at a time, in
//     order. Deliveries are not ordered (each retries on its own).
//   - A delivery is never lost to a dying relay: a claim (FOR UPDATE SKIP
//     LOCKED) moves its next_attempt_at past the lease and counts the
//     attempt, so a relay that dies mid-attempt leaves it due again. The
//     attempt and the delivery's next state are recorded in one
//     transaction, and only while the delivery is still the claim's (a
//     late answer never overwrites an operator's re-send).
//   - One endpoint cannot starve another: this process runs at most
//     Senders attempts, at most PerEndpoint of them to one endpoint, and
//     due endpoints are served in random order. An endpoint's rate limit
//     is a token bucket on its health row, shared by every replica.
//   - The answer decides (the design's table): 2xx succeeded; 410 failed
//     and the endpoint disabled (one alert); another 4xx except 408, 409
//     and 429 failed; anything else (3xx: redirects are never followed; a
//     timeout, a refused address) is retried on Schedule with ±10 %
//     jitter, a later Retry-After honoured, and failed after the last.
//   - Receivers are reached safely: no proxy, no redirect, every
//     connection's address checked after DNS by outbound.Policy (a name
//     rebinding to a private address is refused), at most 1 KiB of an
//     answer read and stored. Errors, logs and alerts never carry an
//     endpoint's URL beyond outbound.Redact (net/http's errors quote it).
//   - An endpoint failing every attempt for DisableAfter is disabled by
//     exactly one replica (disable_outbound_endpoint), which alerts once.
//   - Retention: attempts older than LogRetention go; messages older than
//     MessageRetention with no pending delivery (but to a deleted
//     endpoint) go with their deliveries.
//
// Each attempt is a span, child of the event's trace (the traceparent of
// its Kafka record, stored with the message).
package deliver
