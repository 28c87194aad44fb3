// Package wallets reads a user's wallet balances and recent ledger entries
// for GET /v1/wallets/{user_id}. It only reads: the ledger is written by the
// payout worker alone.
package wallets
