// Package intake moves dead letters from the <topic>.dlq topics into the
// dead_letters table, where operators can see and replay them. It keeps the
// third promise (docs/design/architecture.md, "Promises"): a failure that
// reached a .dlq topic ends in Postgres, and is never dropped on the way.
//
// The rules that keep it:
//
//   - Offsets are committed by hand (kgo.DisableAutoCommit), and only after
//     every record of the polled batch is stored in one Postgres
//     transaction. A crash before the commit redelivers the batch, and
//     pkg/dlq.Insert stores each letter once (unique on its origin), so
//     redelivery is harmless.
//   - While Postgres cannot store a batch (it is down, or the deployment is
//     broken), nothing is committed and the same records are retried with a
//     growing, capped backoff, within Config.RetryFor
//     (DLQ_STORE_RETRY_FOR). Rebalances are blocked meanwhile
//     (kgo.BlockRebalanceOnPoll), so the batch is committed by the member
//     that still owns its partitions. Past the bound the batch is released,
//     never dropped: its partitions are rewound (SetOffsets) to its first
//     records, rebalances may run, and the next poll brings the same records
//     back. The retry never ends in a loss because there is nowhere safer
//     for a dead letter than this table; the stall shows in the progress
//     gauges and the stall alert.
//   - When Postgres refuses a batch for the data one letter carries (a
//     data exception, a check violation, an index row too large: the same
//     letter fails the same way every time), the letters are stored one by
//     one and the refused one is stored raw: the record's value as it came,
//     short cleaned text fields, no headers, class poison and an error that
//     says so (aegis_dlq_stored_raw_total). One bad letter never holds the
//     others.
//   - A record whose failure headers cannot be read is stored anyway, with
//     what could be read, and its error text says the headers were
//     malformed. Values Postgres would refuse (NUL bytes, invalid UTF-8, an
//     int4 overflow) are cleaned first, because a record Postgres refuses
//     for ever would stall its partition for ever.
//   - After a batch stored new letters the consumer calls Config.OnStored
//     (package depth's Notify), which raises their alerts from Postgres;
//     the consumer itself never alerts, so letters other services wrote
//     directly alert through the same path.
//   - On shutdown the attempt in flight may finish (bounded by
//     Config.AttemptTimeout) and what it stored is committed before Run
//     returns; nothing new is polled.
package intake
