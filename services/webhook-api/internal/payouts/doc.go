// Package payouts accepts payout requests: it validates them, enforces the
// client's Idempotency-Key, and commits the payout (INITIALIZED), its first
// transition and the payout.requested command to the outbox in one
// transaction. It never moves money; the payout worker does, so a request is
// answered fast and a crash after the answer loses nothing.
//
// Idempotency keys are scoped per API client (the token's name): the same key
// with the same body returns the same payout, with another body it is refused
// (ErrKeyReused → 422). Concurrent requests with one key resolve to one payout
// through the (client_id, idempotency_key) unique constraint.
package payouts
