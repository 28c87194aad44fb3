// Package handler routes the payout worker's messages: verified PSP events
// from aegis.webhook.pending (credits, payout outcomes) and payout commands
// from aegis.transactions.
//
// Every money event is evidence checked before it moves money: a credit,
// refund or dispute that is not about our own money in our key's mode
// (origin.Foreign: a Stripe event of the other livemode or of a connected
// account) is claimed and dead-lettered with class evidence_mismatch in one
// transaction, before a credit is queued for its group (foreign.go); payout
// outcomes pass the same check in payout.Processor.Finalize.
//
// A credit is committed by ledger.CreditCommitter with the other credits
// waiting at that moment (group commit: one pipelined transaction, one
// WAL flush): its ledger posting (which names the message and is its
// idempotency record: no processed_events row) and balance. The
// handler waits for its own credit's outcome, so the consumer's offsets
// move exactly as when each credit was its own transaction; a credit that
// fails its group is committed again alone and fails only its own record.
// Credits take no Redis wallet lock: they only add money, and the wallet
// row lock in the ledger posting serializes them with debits. Events that
// change no money are acknowledged without touching the database.
package handler
