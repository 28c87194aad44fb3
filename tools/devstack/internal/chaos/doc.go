// Package chaos proves the three promises (docs/design/architecture.md) under injected
// faults, the way systems people trust earn that trust: by running the real
// thing while breaking it, then checking invariants rather than reading code.
//
// A run starts the whole suite as processes (two relays, two workers, one
// webhook-api and dlq-admin, kfake with a data directory, the PSP stand-in
// and a Redis of its own), drives it with a seeded workload of signed Stripe
// and Paystack webhooks (duplicates, twin events for one payment, stale
// finalisations, bad signatures and bodies) and payout requests (repeated
// Idempotency-Keys, with the same and with another body, each to a
// destination registered first: Stripe ones to connected accounts, by a
// transfer alone or by a transfer and then the account's payout, some of
// which fail after the transfer (connect.go)), a second API client
// reaching for the first one's users (payouts, reads, destinations: all must be refused 403 and
// leave nothing behind) and payments whose user id no store can hold (they
// must be answered, dead-lettered and never credited), refunds (partial,
// full, failing after creation) and disputes (won, lost) of earlier
// payments, some duplicated or in the wrong order (moneyback.go), and meanwhile
// injects faults on a seeded schedule: SIGKILL of a relay or of a worker
// (the latter while PSP calls are slow, so it dies between the call and the
// commit; and, once the PSP is seen holding a payout call unexecuted, of
// both workers, so that only redelivery can finish that payout), Kafka
// stopped and restarted on its data directory, a leader election (produce
// and fetch refused NOT_LEADER_FOR_PARTITION for 1–3 s through kfake's
// fault hooks), Redis restarted under held wallet locks,
// Postgres connections terminated, and bursts of PSP 5xx, 429, timeouts and
// invalid-account rejections, and payments, refunds and disputes made at the
// PSP stand-in while it loses their webhooks for good (reconcile.go).
//
// Then the faults stop, a PSP reconciliation is requested from dlq-admin
// (it must recover the lost events from the PSP's record), the system drains (bounded), every open dead letter
// that can be replayed is replayed through dlq-admin (except those of
// payouts whose connected payout failed), it drains again, a few
// payouts with unknown outcomes are planted in NEEDS_REVIEW and an operator
// reverses the transfers of payouts whose money sits in a connected account
// and resolves every other NEEDS_REVIEW payout from the PSP's record through
// dlq-admin, the larger ones with four-eyes (operator.go), it drains a last
// time, and the invariants are checked (invariants.go): no payout may be
// left non-final. The seed makes a failing run
// reproducible: the same seed gives the same workload and fault schedule.
//
// The week profile (timescale.go, week.go, weekcheck.go) compresses time:
// every duration that governs money over days (the PSP's idempotency
// window, the sweeper's and the PSP reconciliation's intervals, backoff,
// breaker, waits) is divided by one factor, so seven simulated days pass in
// minutes, with faults spanning simulated hours to a day and invariants
// that only a long horizon can break (a payout paid twice after the PSP
// forgot its key, money given back while the PSP paid, a payout past its
// deadline without an alert, a forged money event that moved money, a
// settlement event that did not reach both of the outbound endpoints the run
// registers through dlq-admin's API, one of them down for simulated hours:
// outbound.go). Durations that measure wall-clock work keep their values;
// ScaledVars lists each with the reason.
package chaos
