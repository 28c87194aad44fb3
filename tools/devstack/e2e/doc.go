// Package e2e drives the real binaries through the whole path: a signed
// Stripe payment credits a wallet, a payout goes out through the PSP
// stand-in, its payout.paid webhook finishes it, and a payout to an invalid
// account ends with its hold released and a dead letter an operator can see
// in dlq-admin. It runs the same stack package as `make dev`.
package e2e
