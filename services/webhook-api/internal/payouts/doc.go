// Package payouts accepts payout requests: it validates them, enforces the
// client's Idempotency-Key, checks the destination and the limits, and
// commits the payout (INITIALIZED), its first transition and the
// payout.requested command to the outbox in one transaction. It never moves
// money; the payout worker does, so a request is answered fast and a crash
// after the answer loses nothing.
//
// Idempotency keys are scoped per API client (the client's name, whichever
// of its tokens it used): the same key with the same body returns the same
// payout, with another body it is refused (ErrKeyReused → 422). Concurrent
// requests with one key resolve to one payout through the (client_id,
// idempotency_key) unique constraint. A repeated key is answered before
// anything else is checked, so a client retrying after its destination was
// disabled or a limit lowered still learns what became of its payout.
//
// A new payout goes only to an active destination registered for its user
// and provider (destinations.Resolve, which holds the row until commit) and
// only within the configured limits: a per-payout maximum and a per-user
// maximum over a rolling 24 hours, per currency, off unless configured. The
// daily check takes a transaction-scoped advisory lock on (user, currency),
// so concurrent requests cannot slip under the limit together.
//
// The payout's rows are payout-worker's (one writer per table): the
// payout and its first transition are written by payout-worker's
// create_payout, a cancel by its cancel_payout (the cancelable check under
// the payout's row lock), both called in this package's transaction, so
// the answer still comes once the payout exists or is canceled, with its
// Idempotency-Key and outbox row committed with it. It reads them only
// through payouts_for_api and payout_transitions_for_api, so it needs no
// grant on payout-worker's tables; it takes no row lock on a payout
// (cancel_payout takes it, as the tables' owner).
//
// Data Postgres refuses (database.RefusesData) is the client's to fix and is
// answered as such (ErrRefused → 400), never as a 503 to retry; Normalize
// refuses what it can see first.
package payouts
