// Package resolution lets operators end what machines cannot: a payout in
// NEEDS_REVIEW, resolved as paid or as failed with a mandatory reason and
// the PSP's object id as evidence.
//
// Why it works this way: the ledger belongs to payout-worker, so dlq-admin
// never moves money. A resolution is recorded here (payout_resolutions, its
// audit_log row and a payout.resolution command in the transactional
// outbox, one transaction); the relay publishes the command on
// aegis.transactions keyed by the payout's user id, so it is ordered with
// that wallet's payout commands; the worker checks the operator's evidence
// against the PSP's own record and applies it (settle or release the hold,
// once) or refuses it, and records its verdict in its own table
// (resolution_verdicts, in the transaction of the ledger posting). This
// package reads a resolution through payout_resolutions_state, the one
// definition of its status: pending → applied or refused, with the PSP's
// answer, which GET /v1/resolutions/{id} shows. payout_resolutions has one
// writer, this package: recording a payout's next resolution first closes
// the decided ones (their status becomes the verdict's), so the unique
// index that admits one open resolution per payout frees the payout once
// the worker has decided.
//
// With a second approver required (package approval), nothing is sent
// until a different person approves: a resolution of a payout of more than
// SECOND_APPROVER_RESOLUTION_AMOUNT (0: every one) waits as
// awaiting_approval, held at the approval gate in the transaction that
// records it. This package is the owner of those requests: approving one
// sends it, in the transaction that records the approval; rejecting one
// closes it unsent. Either refuses a resolution no longer awaiting its
// approval, so a resolution is sent at most once.
package resolution
