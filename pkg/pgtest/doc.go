// Package pgtest gives tests a real, migrated Postgres database of their own.
// Import it only from _test.go files.
//
// The schema is migrated once into a template database named after a hash of
// the migration files; each test then gets CREATE DATABASE ... TEMPLATE, a
// copy that takes milliseconds, and drops it when the test ends. Tests that
// must commit (the relay, consumers, anything with concurrency) stay isolated
// without truncating shared tables.
//
// TEST_DATABASE_URL points at a server where the test user may create
// databases; it defaults to postgres://127.0.0.1:5432/postgres (trust auth).
package pgtest
