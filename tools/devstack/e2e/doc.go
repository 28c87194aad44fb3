// Package e2e drives the real binaries through the whole path: a signed
// Stripe payment credits a wallet, a payout goes out through the PSP
// stand-in, its payout.paid webhook finishes it, and a payout to an invalid
// account ends with its hold released and a dead letter an operator can see
// in dlq-admin. It runs the same stack package as `make dev`.
//
// Every test starts a stack of its own (database from the migrated
// template, kfake, PSP stand-in, services on free ports): most of a test's
// time is waiting on that stack (timeouts, settle windows, leases), so the
// tests run in parallel (go test's -parallel, GOMAXPROCS by default). They
// share only the binaries, built once per run into TestMain's directory,
// and Redis, where the services keep nothing but wallet locks: each test
// pays its own users. TestChaosShort stays serial: its faults and
// its bounds are judged against one suite alone on the machine, and go test
// runs it before the parallel tests start.
package e2e
