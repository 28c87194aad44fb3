// Package bench measures the performance targets of the issues with the
// real binaries on this machine (`make bench`): webhook ingest against a
// pgbench baseline of the same two inserts run just before it on the same
// Postgres, the relay's drain rate and commit-to-Kafka latency, and the
// payout worker's credits and payouts per second from Kafka. It prints one
// table and can write it to docs/benchmarks.md with the machine it ran on.
//
// Timing lives here, never in tests: tests assert outcomes, benchmarks
// measure.
package bench
