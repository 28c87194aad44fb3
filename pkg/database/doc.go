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
// parameters (@user_id; sqlc.narg(x) where NULL means "any"). sqlc
// (sqlc.yaml at the repository root, pinned in tools/sqlc) compiles them
// against the schema of migrations/*.up.sql into typed pgx/v5 code in the
// store's sqlcdb package: one Params struct per statement instead of $1…$20,
// and sqlcdb.DBTX (a pool, a connection or a pgx.Tx) instead of hand-written
// "pool or tx" interfaces; a store that must join the caller's transaction
// calls sqlcdb.New(tx) or Queries.WithTx(tx). The generated code is
// committed: `make generate` regenerates it and `make generate-check`
// (part of `make test`) fails when it is stale. A query whose text is
// assembled at run time has no place in a queries.sql; it stays next to
// its store, built from constants, and says why.
//
// Converted: pkg/dlq (its 20-column insert; dlq.Insert takes a
// sqlcdb.DBTX); webhook-api destinations (Resolve takes a destinations.Ref,
// not four strings) and pspsync (runs and cursors); dlq-admin resolution
// (resolutions and approvals), recon, replay (jobs, job letters, no-op
// checks), pspruns, store's audit insert and MaxID (see below), and
// webhook-api payouts (Create's 11-column insert, idempotency key and
// limits; Get's reads; Cancel's lock, update and transitions);
// pkg/outbox (all but its multi-row insert, which sqlc cannot
// compile; the statements writers queue into their own pgx.Batch by the
// exported text: its doc) and outbox-relay's LISTEN;
// payout-worker's payout store (store.go, sweep.go: load, update,
// transitions, attempts, evidence, sweeper). Statements a store pipelines
// with others in one pgx.Batch are queued through a hand-written
// sqlcdb/batch.go beside the generated code (sqlc's :batch kinds send a
// batch per statement), so the round trips stay as they were;
// webhook-api ingest (its queries.sql, unnest insert included: each
// statement is recorded from its generated method into the group's
// pipelined transaction, so round trips did not change; ingest/doc.go).
//
// Not converted yet, and why:
//   - dlq-admin store (store.go, resolve.go, payouts.go, payoutlist.go),
//     except the audit insert, MaxID, Stats, FailedAgain, DiscardMany and
//     ClearAlerts (its queries.sql; CountOpen and MaxID take a
//     sqlcdb.DBTX, which replaced store.Querier): List,
//     Groups, the open-letter selections and the payouts list build their
//     WHERE clause from the filters a request sets, so that each filter is a
//     plain condition the planner serves from its index under a generic
//     plan; one static statement with "sqlc.narg(x) IS NULL OR …" per
//     filter would not be. Get, Lock, MarkReplayed, MarkDiscarded and
//     PendingAlerts return the same summary column list into one scan
//     (Summary.fields); in sqlc each would be its own ~20-field row type
//     with its own copy of the mapping, so they stay beside that list.
//   - the hot paths `make bench` measures that are left: webhook-api
//     wallets, payout-worker's ledger (its one-statement hold and the
//     credit batch; the bench's pgbench baseline reads the same constants),
//     resolution reads and consume (processed). They keep their constants,
//     each in one queries.go or store.go per store. The ones converted
//     (ingest, pkg/outbox and the relay, the payout store) kept their
//     statements and round trips, and docs/reports/benchmarks.md's run after them
//     shows no regression.
package database
