// Package partition keeps tables that are retained by time partition
// (docs/design/data-lifecycle.md): daily partitions are created ahead of
// time and a partition wholly older than its table's retention is dropped
// whole, never deleted row by row.
//
// Guarantees:
//   - Only the tables listed in partition_policies are ever touched, and
//     only through maintain_partitions (migration 000044), a SECURITY
//     DEFINER function of the schema owner: the services' roles keep DML
//     only. What to keep (days ahead, retention, dedupe horizon) is the
//     policy row's, not the service's.
//   - Every replica of a service that keeps partitions runs a Keeper: at
//     its start and every Interval (an hour) it calls maintain_partitions,
//     which serialises callers per table (an advisory lock) and does
//     nothing when nothing is due, so no replica needs to be elected and
//     any replica that is up keeps the partitions. A failed run is retried
//     after RetryAfter (a minute). Not a River periodic job: River elects
//     one leader per database for every River client of the suite, and only
//     the leader's client inserts its periodic jobs, so a periodic job of
//     webhook-api's is never inserted while dlq-admin's client (or another
//     of webhook-api's own) leads; a second River client in webhook-api
//     took the leadership from pspsync's and its scheduled run never came.
//   - There is no DEFAULT partition: a row with no partition fails its
//     INSERT loudly (webhook ingest answers 5xx and the PSP retries), so
//     partitions are made two weeks ahead, and Gauges export how far ahead
//     they reach and how long the oldest one has been past its retention:
//     AegisPartitionsAheadShort and AegisPartitionRetentionBehind page
//     before either costs anything.
//   - Each run trims every dedupe key past the horizon and a day: it calls
//     maintain_partitions again while a call trims a full batch (100 000
//     keys), for up to TrimBudget (5 minutes: hundreds of millions of keys
//     at the measured rate); a run that spends it with keys left is
//     followed by another after RetryAfter. aegis_partition_keys_trim_behind_seconds
//     says how long runs have ended with keys left
//     (AegisDedupeKeysTrimBehind).
//   - A policy's time scale (partition_policies.time_scale, migration
//     000051) compresses its day, retention and horizon for soaks and
//     tests, set only by Rescale on an empty table; the Keeper runs every
//     Interval / scale, so it keeps as many runs per partition at any
//     scale. A deployment's policy is never scaled: Gauges export the scale
//     and AegisPartitionPolicyScaled pages above 1.
//
// A drop waits at most 200 ms for its ACCESS EXCLUSIVE lock on the parent
// (inserts queue behind a waiting drop) and is otherwise skipped until the
// next run; creating a partition attaches it, which blocks no insert.
package partition
