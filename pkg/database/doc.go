// Package database opens the pgx pool every service uses and translates
// Postgres errors into what callers decide on: a unique violation means "this
// was already done" (idempotency), a serialization failure, deadlock or lost
// connection means "retry", a check violation means the database refused to
// corrupt money.
//
// Transactions go through InTx so that every path rolls back on error and on
// panic alike; writes that must commit together take the caller's pgx.Tx.
package database
