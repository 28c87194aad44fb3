// Package inbox is a consumed message as the payout worker's domain code
// sees it, and its idempotency record (processed_events): what a handler
// needs to apply a message exactly once and to dead-letter it. It is its
// own package so that the domain packages (payout, handler) do not import
// the transport (consume), which only turns Kafka records into Messages
// and decides when offsets may be committed.
//
// A handler applies a message exactly once by stating its effect to Once
// (or InTx, Once in a transaction of its own): the claim is written in the
// effect's transaction, before it, and a message already claimed changes
// nothing. The claim is written nowhere else but QueueClaim (the same
// statement pipelined with a caller's load). A credit that posts writes no
// claim: the ledger's credit statement reads processed_events (a message
// recorded here as handled, a refusal with its dead letter, is not posted
// later) and its ledger transaction, unique per payment and naming the
// message, is the record that makes a redelivery change nothing.
package inbox
