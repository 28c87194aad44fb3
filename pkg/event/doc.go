// Package event defines the records Aegis services exchange over Kafka: their
// JSON shapes, event types and message ids. It is the one place the producer
// (webhook-api, via the outbox) and the consumer (payout-worker) agree on.
//
// Event types are event.Type constants (types.go), named there once: the
// PSP webhook types the normaliser acts on and the types Aegis publishes.
//
// Fields are only ever added; a consumer ignores fields it does not know, so
// producers and consumers can be deployed in any order.
package event
