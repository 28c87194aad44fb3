// Package ingest turns a verified PSP webhook into one provider-neutral
// envelope (event.PSPEvent) and commits it: the inbox row in webhook_events
// and its outbox row in one transaction, so the PSP's 200 means the event is
// durable and will reach Kafka.
//
// Guarantees:
//   - A duplicate (same provider and event id) commits nothing new and is
//     acknowledged again; this is also Paystack's only replay protection.
//   - An event we act on that lacks what we need (a payment without
//     metadata.user_id) is stored and goes straight to the dead-letter store
//     with the reason, in the same transaction: never silently dropped, never a
//     5xx that would make the PSP retry forever.
//   - An event type we do not act on is stored and published with action
//     "none".
//
// Stale events. psp_objects keeps the newest occurred_at seen per PSP
// object; an event older than that is stored and published for the record,
// answered "stale" and, for payout outcomes, flagged stale in its envelope so
// the worker changes nothing. Within one group the newest event of an object
// wins, as it would one transaction apart.
//
// Group commit. A Committer gathers the webhooks that arrive while the
// previous group is committing into one transaction (credits and events we
// do not act on: one round trip of four statements whatever the group's
// size); each request is answered only after its own group committed.
//
// Stripe sends charge.succeeded and payment_intent.succeeded for one payment;
// both carry the PaymentIntent id as their Reference, which the ledger keys
// credits on, so a payment is credited once. A charge that is only authorised
// (captured=false) credits nothing.
package ingest
