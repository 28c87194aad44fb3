// Package intake moves dead letters from the <topic>.dlq topics into the
// dead_letters table, where operators can see and replay them. It keeps the
// third promise (docs/design/architecture.md, "Promises"): a failure that
// reached a .dlq topic ends in Postgres, and is never dropped on the way.
//
// It is a handler on pkg/consumer's loop, which owns polling, order,
// retries, rewinds and commits; the rules that keep the promise:
//
//   - A record's offset is committed only after its letter is stored (the
//     loop commits after the handler returned nil). A crash before the
//     commit redelivers it, and pkg/dlq.Insert stores each letter once
//     (unique on its origin), so redelivery is harmless.
//   - Each letter is one statement; letters of different keys are stored
//     concurrently. Dead letters come a few at a time, so a batch
//     transaction would buy nothing that matters: one statement per letter
//     stores a few thousand a second.
//   - While Postgres cannot store a letter (it is down, or the deployment is
//     broken), nothing is committed and the same letter is retried in place
//     with a growing, capped backoff, within Config.RetryFor
//     (DLQ_STORE_RETRY_FOR; failed attempts count in
//     aegis_consumer_messages_total{outcome="transient"} under the .dlq
//     topic). Past the bound the record is never dropped: the consumer has no
//     dead-letter path of its own, since there is nowhere safer for a dead
//     letter than this table, so its partition is rewound to it and the next
//     poll brings it back (aegis_consumer_retry_exhausted_total). The stall
//     shows in the progress gauges and the stall alert.
//   - When Postgres refuses a letter for the data it carries (a data
//     exception, a check violation, an index row too large: the same letter
//     fails the same way every time), it is stored raw: the record's value
//     as it came, short cleaned text fields, no headers, class poison and an
//     error that says so (aegis_dlq_stored_raw_total). Every failure the
//     handler returns is therefore transient: a refusal never holds its
//     partition.
//   - A record whose failure headers cannot be read is stored anyway, with
//     what could be read, and its error text says the headers were
//     malformed. Values Postgres would refuse (NUL bytes, invalid UTF-8, an
//     int4 overflow) are cleaned first.
//   - After a letter was newly stored the consumer calls Config.OnStored
//     (package depth's Notify), which raises their alerts from Postgres;
//     the consumer itself never alerts, so letters other services wrote
//     directly alert through the same path.
//   - A panic while storing is recovered and counted (component
//     dlq-admin/consumer); the record is rewound and stored on redelivery.
//   - On shutdown the attempts in flight may finish (bounded by
//     Config.AttemptTimeout) and what they stored is committed before Run
//     returns.
package intake
