// Package stripeapi is Aegis's one client of Stripe's API: every request the
// product sends to Stripe goes through it, whichever service sends it (the
// payout worker's transfers and lookups, webhook-api's reconciliation and
// destination checks), so each request kind is written once and proved once
// against stripe-mock, which validates requests against Stripe's own OpenAPI
// description (stripemock_test.go).
//
// It speaks stripe-go v76 and returns stripe-go's types and errors: what a
// Stripe answer means (paid, failed, unknown) is the caller's to say.
//
// One retry policy: none inside the client. stripe-go's own network retries
// are off for every request, reads included; a caller retries through its own
// mechanism, which knows how long it may wait and what a retry costs: the
// worker's backoff, breaker and attempt records; River's job retries for the
// reconciliation; the API caller for a destination check (it gets a 503).
// A write carries the caller's Idempotency-Key, so a retry is replayed, not
// repeated, by Stripe.
//
// Lists are Go iterators over stripe-go's auto-paging (newest first, as
// Stripe lists); a caller stops when it has seen enough, and the error of a
// failed page is the iterator's last value.
package stripeapi
