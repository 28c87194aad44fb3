// Package database opens the pgx pool every service uses and translates
// Postgres errors into what callers decide on: a unique violation means "this
// was already done" (idempotency), a serialization failure, deadlock or lost
// connection means "retry", a check violation means the database refused to
// corrupt money.
//
// IsTransient and IsPermanent split server errors by code class: a
// transient one (08, 40, 53, 57, lock timeouts) may succeed if the same
// statement runs again; a permanent one (data exceptions, integrity
// violations, program limits, everything else the server answers) fails the
// same way every time, so retrying it in place would stall whoever waits.
// An error that never got a server answer is transient: its fate is unknown.
// RefusesData is the narrower question a front door asks ("was it the data
// the caller sent?"): data exceptions, non-duplicate integrity violations and
// program limits. It is false for a broken deployment (an undefined table),
// which an operator fixes while the sender retries.
//
// Transactions go through InTx so that every path rolls back on error and on
// panic alike; writes that must commit together take the caller's pgx.Tx.
package database
