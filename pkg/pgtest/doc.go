// Package pgtest gives tests a real, migrated Postgres database: a
// transaction on a shared database, rolled back when the test ends (Tx), or
// a database of their own (New). Import it only from _test.go files.
//
// Tx is the cheap one, for store tests whose code runs on one transaction.
// DB.As opens a pool on a New database as a service's role.
// DB.AfterContract revokes there what the next release's contract
// migration revokes, so that a test as a role runs with the grants the
// role keeps afterwards. RoundTrips counts what a pool sends, for tests
// that hold a hot path to its round trips.
//
// The schema is migrated once into a template database named after a hash of
// the migration files. The shared database is a copy of it, made once; each
// test on New gets its own copy (CREATE DATABASE ... TEMPLATE, milliseconds)
// and drops it when the test ends, so tests that must commit (the relay,
// consumers, anything with concurrency) stay isolated without truncating
// shared tables.
//
// TEST_DATABASE_URL points at a server where the test user may create
// databases; it defaults to postgres://127.0.0.1:5432/postgres (trust auth).
package pgtest
