// Package relay moves committed outbox rows to Kafka: promise 1 of
// docs/design/architecture.md ("nothing acknowledged is lost") from Postgres
// onwards.
//
// A cycle claims a batch (pkg/outbox: one statement, SKIP LOCKED, a lease),
// produces every row asynchronously with franz-go's idempotent producer,
// waits for every ack, and settles: published rows are deleted in one
// statement (nothing reads a published row again: Kafka has it, and the
// consumers record what they made of it; rows an earlier relay marked
// processed are purged every minute); a failed row gets its attempt
// recorded and its next try scheduled with full-jitter backoff; a row out
// of attempts, or one Kafka can never accept (too large), is marked dlq and
// written to dead_letters in the same transaction — Kafka may be what is
// down — then published to aegis.outbox.dlq on a best-effort basis.
//
// Any number of relays may run: claims never overlap, and a relay that dies
// mid-batch leaves rows whose lease runs out and which another relay takes
// over (at-least-once; consumers are idempotent). Per key, rows are claimed
// in commit order and only by the relay holding the key's first unfinished
// row: a cycle takes a run of the key's consecutive due rows (see
// pkg/outbox), so a hot key drains a batch per cycle, and produces them in
// order on the key's partition. If a row of a run fails and is to be
// retried, the rows behind it in the batch are handed back without spending
// an attempt and wait for it, so per-key order holds on Kafka across
// retries and replicas. That needs the rows behind a failed produce request
// to fail too, never land: the client flushes manually, a batch at a time,
// so none of them can start the producer's next epoch (see ClientOpts).
// A row not yet due (a NotBefore, a failed row's next try) holds back its
// key's later rows the same way; that is why a delayed retry is written
// under a key of its own (a payout's retry: payout-retry:<payout id>), not
// under the wallet's key, which it would hold back for its whole delay.
//
// A gobreaker breaker guards Kafka: after consecutive failed batches it
// opens and the relay stops claiming until a probe may go through, so it does
// not hammer a broken broker nor spend the rows' attempts on it.
//
// A batch that was not full is settled in the background while the loop
// claims and publishes the next one (the latency path: a new row does not
// wait for the previous batch's settle round trip and commit). Order is
// safe because an unsettled row stays processing under its lease, and a key
// whose first unfinished row is leased is not claimed by anyone; when a
// claim of the process ran while a batch was unsettled, the settle wakes the
// relay, so rows that claim skipped behind the batch go out at once, not at
// the next poll. A full batch (a backlog) is settled before the next claim.
//
// The relay wakes on Postgres NOTIFY (writers signal on commit) and falls
// back to polling; an idle relay sleeps. A SIGTERM lets the batch in flight
// finish and settle before the relay exits.
package relay
