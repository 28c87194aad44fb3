// Package dlq defines a dead letter: the record that failed, where it came
// from, why, and every attempt made before giving up. It writes dead letters
// to the dead_letters table and to <topic>.dlq records, and reads them back.
//
// A dead letter is written exactly where the failure is seen. The relay writes
// its row in the same Postgres transaction that marks the outbox row dlq,
// because Kafka may be what is down. A consumer publishes to <topic>.dlq (its
// only durable channel that does not depend on its own database transaction
// succeeding) and dlq-admin stores it. Insert is idempotent on the letter's
// origin, so a record delivered twice is stored once.
//
// Every service writes its letters through a Writer, the one dead-letter
// path: Insert (relay, ingest, the payout worker's sweeper: straight into
// dead_letters in the transaction that gives up; a sweeper's letter has no
// origin offset, so only a direct insert keeps it from being stored twice
// when its record is published twice), Stage (the payout worker's
// handlers: through the outbox in the transaction that records the state
// the failure left; the letter carries its record's origin, which makes a
// second publish a no-op) or Written after the consumer published the
// record itself. The writer
// counts each letter once in aegis_dead_letters_total{source,topic,class}
// (the scrape adds service and pod) and logs it; it never pages (dlq-admin does, see pkg/alert).
//
// Ingest also writes letters whose payload is not a message of their topic:
// a PSP webhook exactly as received, when it could not be stored as sent
// (header payload_format = psp_webhook). The payload column is bytea so it
// keeps any body byte for byte; such a letter is for a person, not a replay.
package dlq
