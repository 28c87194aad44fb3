// Package payout runs the payout state machine (docs/design/architecture.md):
//
//	INITIALIZED → SENDING_TO_GATEWAY → SENT_TO_GATEWAY → AWAITING_RESPONSE → SUCCEEDED
//	                    ↘ RETRYING(n) → SENDING_TO_GATEWAY …
//	                    ↘ FAILED → FINALIZED            (definite failure: hold released)
//	                    ↘ NEEDS_REVIEW                  (outcome at the PSP unknown)
//	SENDING_TO_GATEWAY → RETRYING                         (past its deadline: resumed by a lookup)
//	SENDING_TO_GATEWAY, RETRYING, SENT_TO_GATEWAY, AWAITING_RESPONSE → NEEDS_REVIEW
//	                                                      (past the state's deadline; Deadlines)
//
// The two changes to a payout that start at a client are this service's
// too, written as functions of its migration that webhook-api calls in its
// own transaction (migrations 000034): create_payout writes the INITIALIZED
// row and its first transition, cancel_payout moves an INITIALIZED payout
// to FAILED → FINALIZED under the row lock Load takes, so a cancel and this
// machine's first step never both win; the loser finds the other's state.
//
// Processing a payout command takes the wallet lock, then in one transaction
// holds the money (wallet → payout holds) and moves to SENDING_TO_GATEWAY;
// only then is the PSP called, with an Idempotency-Key derived from the payout
// id. A create is on disk before it is on the wire: before it is sent, its
// key, attempt number and send time are committed (payouts.sending_at,
// first_attempt_at, psp_key, and a payout_attempts row with outcome
// "sending"). When the attempt sends without a lookup first, the key is
// known before the call and these go in the transaction that holds the
// money, at no commit of their own (createAhead); after a lookup, whose
// answer chooses the key, they are committed between the lookup and the
// create (beginCreate). The answer is recorded in a second transaction with the
// create's outcome, the processed_events row, the next retry (an outbox row
// with next_retry_at, keyed by the payout so that it holds back none of the
// user's other records: order.go) or the dead letter (an outbox row for <topic>.dlq), so
// nothing decided is lost to a crash. A call whose answer is never recorded
// (the worker stopped during it, Postgres away past the in-place retries so
// the command is dead-lettered, the wallet lock lost) leaves the payout in
// SENDING_TO_GATEWAY with sending_at set. Whatever delivers its command
// next (the redelivery, an operator's replay of its dead letter, a command
// published again) resumes it as an
// unknown outcome from that send time (outcome_unknown, last_unknown_at; the
// "sending" row becomes "unknown"): within the PSP's idempotency window the
// same key gets the PSP's own answer back; past it the payout is looked up
// first, as below, because the PSP has forgotten the key. A payout moved
// out of SENDING_TO_GATEWAY by anything but the create's recorded answer
// (an outcome event, an escalation) keeps that create as an unknown
// outcome too (move).
//
// A test-only build (-tags chaos, AEGIS_PLANT_LATE_FIRST_ATTEMPT=1) plants
// the opposite ordering, the create recorded only with its answer, so the
// chaos suite can show it catches the double payment it causes (plant.go).
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
// Lookups and keys (attempt.go): after an unknown outcome (every 5xx,
// timeout or reset: the psp package says which answers the PSPs document as
// not executed; after a 5xx a retry under the same key cannot succeed
// either, as Stripe saves the first answer under an Idempotency-Key, 500s
// included, and replays it for every retry with the key), on an operator's replay of a
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
// Stripe payouts to a connected account's bank account or card are two
// objects at Stripe (psp): the transfer to the account, then the account's
// payout. Each is its own create in payout_attempts (step transfer,
// connected_payout), under its own key, recorded before it is sent; the
// transfer's id is committed on the payout (psp_transfer) with the
// payout's "sending" row, and from then on only the account's payout is
// ever sent again, under the same window and lookup rules (a lookup that
// finds the transfer without its payout sends the payout, never a second
// transfer). Once the transfer is made the money is in the connected
// account's balance: a refusal or failure of its payout never releases the
// hold (failOrHold): the payout goes to NEEDS_REVIEW (class
// connected_payout_failed), where reversing the transfer at Stripe gives
// the money back (its transfer.reversed) and an operator's replay pays it
// out again from the connected account under a new key.
//
// A Stripe transfer reversed in part (transfer.reversed with amount_reversed
// below its amount; Stripe sends one per reversal) gives back each part
// once and keeps the payout SUCCEEDED for the rest; the reversal of the
// rest finishes it (FAILED → FINALIZED). The ledger posts each total once
// and never more than the payout (ledger.Return), whatever order or
// duplicates the events arrive in.
//
// PSP outcome webhooks (payout.paid/failed, transfer.success/failed/reversed)
// are evidence, not commands (finalize.go): one changes its payout only when
// provider, amount, currency, the PSP's object id (once known) match, and
// the event is about our own money in our key's mode (origin.ForeignFor,
// the check every money event passes: for Stripe no Connect account but,
// for the payout.* events of a payout paid out on a connected account,
// that account; livemode our key's). A mismatch
// changes nothing: it is recorded in payout_evidence, dead-lettered with
// class outcome_mismatch (dlq-admin pages for it). Every outcome event about a payout
// is recorded there with its verdict, which GET /v1/payouts/{id} shows. Each
// payout keeps the time of the latest PSP event applied; an older event
// arriving late is recorded and ignored, except a reversal (money only comes
// back after it left, and each reversed total is given back once). That order is judged here only:
// webhook-api cannot tell a genuine event from a mismatched one, and
// counting a forged event dated ahead would make the genuine one look stale
// (the envelope's stale flag is therefore ignored). A payout the PSP paid
// after its hold was released waits in NEEDS_REVIEW for a person: neither
// a replay nor another paid event settles a hold that is gone.
// Every transition and attempt is appended to payout_transitions.
//
// PSP objects waiting for something other than the PSP (psp.Attention): a
// Paystack transfer in status otp waits for a one-time password only a
// person can give, and a status the PSP does not document means nothing we
// may settle on. Either sends the payout to NEEDS_REVIEW with the hold kept
// and one dead letter of class psp_otp_required or psp_status_unmapped (one
// page; the sweeper does not look at NEEDS_REVIEW payouts, so it does not
// page again). A matching outcome event still settles it; an operator's
// replay looks the object up again.
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
// Deadlines (deadline.go): every unfinished state has a maximum age,
// counted from when the payout entered it (payouts.status_since, kept by a
// trigger for every writer), so nothing waits silently. The sweeper acts
// past it, never paying or releasing on a guess:
//
//   - INITIALIZED: no hold, nothing sent; the command is published again,
//     once (a duplicate finds the payout moved on). Then the age alert.
//   - SENDING_TO_GATEWAY: a delivery died after the hold and may have
//     reached the PSP. Under the wallet lock (no delivery at work), the
//     payout is marked as having an unknown outcome sent now and moved to
//     RETRYING (class payout_deadline): its retry runs the lookup and settle
//     window machinery above, adopting what the PSP has, sending again or
//     releasing only on the PSP's confirmed absence after the window.
//   - RETRYING: the retry row was lost; published again, once (a PSP's
//     Retry-After longer than the deadline gets the same grace after it is
//     due).
//   - SENT_TO_GATEWAY, AWAITING_RESPONSE: still pending at the PSP past
//     Deadlines.Pending (Stripe settles a payout within 5 business days)
//     → NEEDS_REVIEW instead of being looked up for ever.
//   - NEEDS_REVIEW: overdue past Deadlines.Review; a person decides.
//
// One automatic resume per payout, over its whole life (payouts.
// deadline_resumes is not reset when the state changes): a SENDING or
// RETRYING payout that stalls after any earlier resume, even one in
// another state, goes to NEEDS_REVIEW, hold kept, with a dead letter of
// class payout_deadline. Every sweep sets the age of the oldest payout in each
// state and the count past the deadline (one index probe and range scan
// per state), which the alert rules watch at the default deadlines.
//
// Operator resolutions (resolve.go): dlq-admin sends an operator's
// resolution of a NEEDS_REVIEW payout (paid or failed, with a reason and
// the PSP object id as evidence) as a payout.resolution command on
// aegis.transactions. The worker checks it against the PSP's own record
// (a lookup) and applies it only on that record: paid on the named object,
// paid, with the payout's amount, currency and id; failed when the PSP has
// no live object. Otherwise it refuses it, never giving a hold back while
// the PSP may pay. An applied resolution settles or releases the hold in
// one transaction with the verdict (a resolution_verdicts row: the worker's
// own table; the request, payout_resolutions, is dlq-admin's), idempotent
// by resolution id.
//
// Replays: dlq-admin replays a dead-lettered command under a new message id
// (the original is in processed_events). A FINALIZED payout ignores it — its
// money is back in the wallet and the client must ask again; a NEEDS_REVIEW
// payout is looked up at the PSP as above. Only a replay resumes a
// NEEDS_REVIEW payout: any other command that finds it parked (a copy
// deferred while the wallet was busy, a re-published one) is claimed and
// ignored, so a parked payout is never sent again, nor parked twice with
// two dead letters, without a person.
package payout
