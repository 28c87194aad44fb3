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
// hold. Once any attempt's outcome was unknown (payouts.outcome_unknown,
// sticky), a later definite failure also goes to NEEDS_REVIEW unless a
// lookup at the PSP confirms it has no object for the payout: the lost
// attempt may still have paid. A 429's Retry-After and an open breaker
// defer the payout without spending an attempt.
//
// Lookups and keys (attempt.go): after an unknown outcome or a 5xx (Stripe
// saves the first answer under an Idempotency-Key, 500s included, and
// replays it for every retry with the key), on an operator's replay of a
// NEEDS_REVIEW payout, and once the first attempt is older than the PSP's
// idempotency window, an attempt first looks the payout up. What exists is
// adopted (a failed object ends the payout as the PSP says); only when the
// PSP confirms there is nothing is the payout sent again, under a new
// attempt-scoped key. Every create (with its key) and every lookup is
// recorded in payout_attempts, so no key is ever used for two objects.
// A lookup that finds nothing proves nothing while a request whose outcome
// is unknown may still be executing at the PSP (a slow create whose answer
// we lost): a new key then would make a second object, and a release after
// a refusal would let the slow request pay money no longer held. So an
// absence counts only once Config.SettleWindow (PSP_SETTLE_WINDOW, longer
// than the call timeout) has passed since the last such request was sent
// (payouts.last_unknown_at). Before that the payout is deferred (RETRYING,
// class psp_settling) to the end of the window without sending, releasing
// or spending an attempt, and looked up again; what appeared is adopted.
//
// PSP outcome webhooks (payout.paid/failed, transfer.success/failed/reversed)
// are evidence, not commands (finalize.go): one changes its payout only when
// provider, amount, currency, the PSP's object id (once known) match, and
// the event is about our own money in our key's mode (origin.Foreign, the
// check every money event passes: for Stripe no Connect account, livemode
// our key's). A mismatch
// changes nothing: it is recorded in payout_evidence, dead-lettered with
// class outcome_mismatch (dlq-admin pages for it). Every outcome event about a payout
// is recorded there with its verdict, which GET /v1/payouts/{id} shows. Each
// payout keeps the time of the latest PSP event applied; an older event
// arriving late is recorded and ignored. That order is judged here only:
// webhook-api cannot tell a genuine event from a mismatched one, and
// counting a forged event dated ahead would make the genuine one look stale
// (the envelope's stale flag is therefore ignored). A payout the PSP paid
// after its hold was released waits in NEEDS_REVIEW for a person: neither
// a replay nor another paid event settles a hold that is gone.
// Every transition and attempt is appended to payout_transitions.
//
// Payouts whose outcome webhook never comes (sweep.go): a payout waiting
// at the PSP (SENT_TO_GATEWAY, AWAITING_RESPONSE) longer than
// SweepConfig.After since its last step or lookup is looked up at the PSP
// and moved on from the PSP's own record, exactly as a matching outcome
// event would move it; still pending, it is looked up again after as long.
// A lookup that fails decides nothing; a PSP that no longer knows a payout
// it accepted, or an object that does not match the payout, parks it in
// NEEDS_REVIEW with the hold kept and a dead letter (one page, from dlq-admin). One replica sweeps at a
// time (an advisory lock).
//
// Operator resolutions (resolve.go): dlq-admin sends an operator's
// resolution of a NEEDS_REVIEW payout (paid or failed, with a reason and
// the PSP object id as evidence) as a payout.resolution command on
// aegis.transactions. The worker checks it against the PSP's own record
// (a lookup) and refuses it when the PSP contradicts it, never giving a
// hold back while the PSP paid; otherwise it settles or releases the hold
// in one transaction with the verdict on payout_resolutions, idempotent by
// resolution id.
//
// Replays: dlq-admin replays a dead-lettered command under a new message id
// (the original is in processed_events). A FINALIZED payout ignores it — its
// money is back in the wallet and the client must ask again; a NEEDS_REVIEW
// payout is looked up at the PSP as above.
package payout
