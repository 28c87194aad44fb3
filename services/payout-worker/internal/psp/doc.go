// Package psp sends payouts to the payment service providers behind one small
// interface, and says what their answers mean for retrying.
//
// Requests go through the one client of each PSP (pkg/stripeapi,
// pkg/paystackapi), which retries nothing itself: retries are the worker's,
// spaced by its backoff and breaker. A Stripe destination is a connected
// account (acct_…): the payout is a Transfer to it (transfer_group and
// metadata[payout_id] our payout id), final when created; where the
// destination names one of the account's external accounts (a bank account
// or card) the transfer is followed by that account's own Payout to it
// (the Stripe-Account header, its own Idempotency-Key: ConnectedPayoutKey),
// finished later by the account's payout.paid or payout.failed webhook. The
// two are asked for one at a time (Result.PayoutMissing after the
// transfer; Request.Transfer for the payout), so the caller records each
// before it is sent. A connected payout that fails leaves the money in the
// connected account's balance: AttentionConnectedPayout, never Failed. A
// bank account or card of the platform's own (a destination registered
// before destinations were connected accounts) is a platform Payout.
// Paystack transfers go over its HTTP API with
// our payout id as the transfer reference. Every call carries an
// Idempotency-Key derived from the payout id (AttemptKey), stable across
// retries, redeliveries and replays, so the PSP itself refuses to pay twice;
// the caller moves to the next key generation only after FindPayout
// confirmed (ErrNotFound) that the PSP has no object for the payout.
//
// FindPayout looks a payout up: Stripe cannot filter by metadata, so it
// lists payouts created since the payout (or transfers by transfer_group,
// which is the payout id) and matches metadata[payout_id]; for a connected
// account's external account, the transfer first, then the account's
// payouts (Stripe-Account): a transfer without its payout is
// Result.PayoutMissing, never ErrNotFound, so no second transfer is ever
// sent. Paystack verifies the transfer by its reference. Any failure to
// answer is an error whose outcome is unknown, never ErrNotFound.
//
// Errors are classified from what the PSP actually said (errclass):
// timeouts, connection failures, 409 key-in-use and 5xx are transient; a 429
// is transient and carries its Retry-After; invalid accounts, invalid
// requests and insufficient PSP balance are permanent. Each error also says
// whether the PSP may have executed the request (Unknown). Only what the
// PSP documents as not executed is "not executed": a connection refused
// before anything was sent (a dial error), a Stripe 429 (rate limiters run
// before the idempotency layer; Paystack documents no 429, so its 429 is
// unknown), a 401/403 (authentication fails before anything runs) and a 4xx
// refusal. Every 5xx (503 included), every timeout after sending and every
// connection reset is an unknown outcome: Stripe saves a request's answer
// under its key once execution began, 5xx included, and neither PSP
// documents any 5xx as safe. Only a
// known non-execution may ever reverse a hold. docs/reference/psp-outcomes.md has the
// table per PSP and status with its sources.
//
// Object statuses are mapped explicitly (Result.Final, Failed, Attention):
// Paystack's documented transfer statuses each mean paid, not paid, still
// moving, or waiting for a person (otp: Attention psp_otp_required); a
// status a PSP does not document is never settled on (Attention
// psp_status_unmapped). See PaystackStatus.
//
// Each provider has its own gobreaker breaker (pkg/breaker); an open breaker
// answers at once with class BreakerOpen and the call is not made.
package psp
