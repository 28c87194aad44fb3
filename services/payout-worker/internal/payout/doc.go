// Package payout runs the payout state machine (ARCHITECTURE.md):
//
//	INITIALIZED → SENDING_TO_GATEWAY → SENT_TO_GATEWAY → AWAITING_RESPONSE → SUCCEEDED
//	                    ↘ RETRYING(n) → SENDING_TO_GATEWAY …
//	                    ↘ FAILED → FINALIZED            (definite failure: hold released)
//	                    ↘ NEEDS_REVIEW                  (outcome at the PSP unknown)
//
// Processing a payout command takes the wallet lock, then in one transaction
// holds the money (wallet → payout holds) and moves to SENDING_TO_GATEWAY;
// only then is the PSP called, with an Idempotency-Key derived from the payout
// id. The answer is recorded in a second transaction with the
// processed_events row, the next retry (an outbox row with next_retry_at) or
// the dead letter (an outbox row for <topic>.dlq), so nothing decided is lost
// to a crash. A crash between the call and the second transaction leaves the
// payout in SENDING_TO_GATEWAY and the message uncommitted; the redelivery
// calls the PSP again with the same key and gets the same payout back.
//
// Money is never returned on a guess: a definite failure (the PSP rejected
// it, or never got it) releases the hold exactly once (ledger kind
// payout_release, unique per payout); an exhausted retry whose last attempt
// may have executed (a timeout, a 500) goes to NEEDS_REVIEW and keeps the
// hold. A 429's Retry-After and an open breaker defer the payout without
// spending an attempt.
//
// PSP outcome webhooks (payout.paid/failed, transfer.success/failed/reversed)
// finish payouts through Finalize. Each payout keeps the time of the latest
// PSP event applied; an older event arriving late is recorded and ignored.
// Every transition and attempt is appended to payout_transitions.
//
// Replays: dlq-admin replays a dead-lettered command under a new message id
// (the original is in processed_events). A FINALIZED payout ignores it — its
// money is back in the wallet and the client must ask again; a NEEDS_REVIEW
// payout is tried once more with the same Idempotency-Key, so if the lost
// attempt did execute the PSP answers with that payout instead of paying
// again.
package payout
