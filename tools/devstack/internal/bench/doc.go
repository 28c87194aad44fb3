// Package bench measures the suite's performance targets with the
// real binaries on this machine (`make bench`): webhook ingest against a
// pgbench baseline of the same two inserts run just before it on the same
// Postgres, the relay's drain rate and commit-to-Kafka latency, the payout
// worker's credits (against a pgbench of the worker's own credit batch, its
// SQL read from the ledger's generated sqlcdb code so the baseline cannot drift) and payouts
// per second from Kafka, what a payout waiting for its retry costs its
// user's credits (backoff.go: their p99 against other wallets'), the
// whole suite end to end (e2e.go), and outbound delivery (outbound.go: a
// backlog of settlement events from the outbox to one local endpoint through
// the relay, Kafka, the relay's intake and dispatcher, each delivery
// verified with the Standard Webhooks library; the rate against the bare
// pgbench, and the commit → receipt latency at half that rate). It prints one table and can write it to
// docs/reports/benchmarks.md with the machine it ran on, keeping the findings
// written below the table, and the e2e plot (plot.go, SVG drawn here: no
// external tool).
//
// The e2e scenario starts the suite as `make dev` does (stack.Start: four
// services, kfake, the PSP stand-in; Postgres and Redis are the machine's)
// and offers load open-loop: requests are due at a fixed rate per step,
// whatever the answers' speed, and latency counts from when a request was
// due, so a slow suite cannot slow the load down and hide its own delay.
// Each step is a fraction of the bare two-table pgbench rate measured
// first (measured again after the credits: the ratio is to the better
// run); a step holds when every request is answered 2xx and every
// acknowledged one is done (credited: its ledger transaction; a payout:
// AWAITING_RESPONSE at the stand-in) with p99 ≤ 1 s. Done times are the
// rows' now(), the start of the transaction that wrote them, one round
// trip before its commit. CPU and RSS per process come from /proc (see
// procstat.go).
//
// The soak (soak*.go, `make soak`, cmd/aegis-soak) asks whether that speed
// lasts: the same suite (startSuite) at 70 % of the sustainable credit rate
// a short search with the e2e's steps finds, open loop for an hour, the
// services' retention divided by one factor so that it runs (one list,
// soak_retention.go). Per window: offered, acknowledged and credited
// throughput, p50/p99 webhook → credited, errors and CPU per process; every
// minute the tables' and indexes' sizes (partitions summed under their
// root), the vacuum counters and the hot statements' plans (EXPLAINed from
// the sqlc-generated text, fingerprinted by shape: soak_plans.go); in the
// middle of the first and the last window, a CPU profile of each service
// (soak_profile.go), so that a decay says where the time went. Its
// verdict compares the last window with the first.
//
// Timing lives here, never in tests: tests assert outcomes, benchmarks
// measure.
package bench
