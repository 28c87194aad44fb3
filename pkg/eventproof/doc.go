// Package eventproof proves that a money event on aegis.webhook.pending was
// verified by webhook-api: only webhook-api and payout-worker hold the key
// (AEGIS_EVENT_SIGNING_KEY), webhook-api signs each PSP event as it writes it
// to the outbox, and the worker moves no money for an event whose proof is
// missing or wrong. Being able to produce to the topic (a leaked Kafka
// credential, a database role that can insert outbox rows) is then not
// enough to credit a wallet, refund, dispute or settle a payout.
//
// The proof is an HMAC-SHA256 (pkg/hmacsig) over a canonical encoding of the
// fields the worker acts on, not over the message bytes: the outbox stores
// the payload as jsonb, which reorders and respaces it, and the bytes that
// reach Kafka are not the bytes webhook-api wrote. The encoding is
// versioned ("v1"); a field the worker starts acting on is added in a new
// version. The PSP's raw body, kept for the record, is not covered.
//
// The proof travels in the message's Header, so it survives everything that
// passes a message on unchanged: the relay, the worker's delayed re-publish
// of a refund waiting for its credit, and dlq-admin's replay of a dead
// letter (letters keep their headers). A replayed genuine event still
// verifies; a forged one replayed is still refused.
//
// Keys rotate without a window of refusals: each proof names its key by an
// id derived from the key itself, and a verifier also accepts the previous
// key (AEGIS_EVENT_SIGNING_KEY_PREVIOUS). Rotate by giving the worker the
// new key with the old one as previous, then webhook-api the new key, and
// drop the previous once no message signed with it can still arrive (dead
// letters signed with it are replayable while it is kept).
//
// Why an HMAC and not a look-up of the stored webhook_events row: the proof
// costs a few microseconds per event (BenchmarkSign, BenchmarkVerify: about
// 2.5 and 1–2 µs on a 2-core machine, the keyed hash states reused through
// hmacsig.Keyed) and no database round trip or grant, where the look-up
// costs a round trip (BenchmarkStoredRowLookup: 95–170 µs on a local
// Postgres) on a path the worker otherwise batches; and the proof also
// covers refund and dispute objects, which webhook_events does not store
// as columns.
package eventproof
