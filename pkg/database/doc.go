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
//
// # Where SQL lives
//
// A store's queries live in a queries.sql file next to it, one named
// statement each (-- name: X :one|:many|:exec|:execrows), with named
// parameters (@user_id; sqlc.narg(x) where NULL means "any"; sqlc.arg(x)
// where a parameter follows a unary minus or precedes an operator, which
// sqlc's @x rewrite gets wrong). sqlc (sqlc.yaml at the repository root,
// pinned in tools/sqlc) compiles them against the schema of
// migrations/*.up.sql into typed pgx/v5 code in the store's sqlcdb package:
// one Params struct per statement instead of $1…$20, and sqlcdb.DBTX (a
// pool, a connection or a pgx.Tx) instead of hand-written "pool or tx"
// interfaces; a store that must join the caller's transaction calls
// sqlcdb.New(tx) or Queries.WithTx(tx). The generated code is committed:
// `make generate` regenerates it and `make generate-check` (part of
// `make test`) fails when it is stale. tools/devstack/internal/sqlcheck
// fails `make test` on SQL in any other Go string of services/ and pkg/
// (its allowlist names the few exceptions and why) and on a payout state
// spelled outside pkg/payoutstate.
//
// Statements that must share one round trip (the ledger's credit batch,
// ingest's group, the payout load with its processed check) are queued
// into one pgx.Batch with Queue: the generated method runs on a Recorder,
// so the text and the argument order come from the generated code. sqlc's
// own :batch kinds send a batch per statement, which would multiply the
// round trips. pkg/outbox's writer statements are queued by their
// exported text (its doc says why).
package database
