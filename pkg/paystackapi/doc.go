// Package paystackapi is Aegis's one client of Paystack's API: every request
// the product sends to Paystack goes through it, whichever service sends it
// (the payout worker's transfers and lookups, webhook-api's reconciliation),
// so each request kind is written once.
//
// It speaks Paystack's JSON envelope ({status, message, data, meta}) and
// returns the answer as Paystack gave it, HTTP status and headers included:
// what an answer means for a payout (paid, failed, unknown) is the caller's
// to say. A transport failure is returned as an error wrapping the net/http
// one, so a caller can tell a request that never left (a dial error) from
// one whose answer was lost.
//
// One retry policy: none inside the client; a caller retries through its own
// mechanism (the worker's backoff, breaker and attempt records; River's job
// retries for the reconciliation). A transfer carries its reference, which
// Paystack refuses to use twice.
package paystackapi
