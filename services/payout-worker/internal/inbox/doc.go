// Package inbox is a consumed message as the payout worker's domain code
// sees it, and its idempotency record (processed_events): what a handler
// needs to apply a message exactly once and to dead-letter it. It is its
// own package so that the domain packages (payout, handler) do not import
// the transport (consume), which only turns Kafka records into Messages
// and decides when offsets may be committed.
package inbox
