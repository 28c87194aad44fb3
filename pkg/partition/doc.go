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
//   - Every replica of a service that keeps partitions (a Keeper) queues
//     the maintenance job at its start and every Interval, unique per
//     period, so one replica runs it per period, and any replica does: River
//     elects one leader per database for all the suite's River clients, so
//     a PeriodicJob of one service would not be inserted while another
//     service's client leads. River retries a failed job and rescues the job
//     of a replica that died.
//   - There is no DEFAULT partition: a row with no partition fails its
//     INSERT loudly (webhook ingest answers 5xx and the PSP retries), so
//     partitions are made two weeks ahead, and Gauges export how far ahead
//     they reach and how long the oldest one has been past its retention:
//     AegisPartitionsAheadShort and AegisPartitionRetentionBehind page
//     before either costs anything.
//
// A drop waits at most 200 ms for its ACCESS EXCLUSIVE lock on the parent
// (inserts queue behind a waiting drop) and is otherwise skipped until the
// next run; creating a partition attaches it, which blocks no insert.
package partition
