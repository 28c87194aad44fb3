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
// Ingest also writes letters whose payload is not a message of their topic:
// a PSP webhook exactly as received, when it could not be stored as sent
// (header payload_format = psp_webhook). The payload column is bytea so it
// keeps any body byte for byte; such a letter is for a person, not a replay.
package dlq
