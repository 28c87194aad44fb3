// Package walletlock serializes work on one wallet across worker replicas with
// a redsync lock on lock:wallet:{user_id}.
//
// The lock expires after 10s so a crashed worker cannot hold a wallet
// forever; while the work runs a watchdog renews it every half expiry. If a
// renewal fails (Redis restarted, the lock expired during a long pause), the
// work's context is cancelled, so its database transaction rolls back rather
// than committing without the lock. Release is owner-only (redsync's
// compare-and-delete script), so a worker never frees a lock another took over.
//
// With several independent Redis nodes (REDIS_URLS) the lock is redsync's
// Redlock: taken and renewed only on a majority of the nodes, so one node of
// three can die mid-payout and the work goes on while the lock stays
// exclusive; losing the majority cancels the work like losing a single Redis.
//
// Redis locks are advisory: a process paused past the expiry can still run
// after another worker took the lock. The money is guarded in the ledger
// transaction itself (row lock and balance check), so an overlap can delay or
// fail work but never double-spend. The lock exists to keep two workers from
// calling the PSP for the same wallet at once and to make contention cheap.
package walletlock
