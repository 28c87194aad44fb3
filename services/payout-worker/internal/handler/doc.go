// Package handler routes the payout worker's messages: verified PSP events
// from aegis.webhook.pending (credits, payout outcomes) and payout commands
// from aegis.transactions.
//
// A credit is one transaction, sent as one pipelined round trip: the
// processed_events row, the ledger posting and the balance. Credits take no Redis wallet lock: they only add money, and the wallet
// row lock in the ledger posting serializes them with debits. Events that
// change no money are acknowledged without touching the database.
package handler
