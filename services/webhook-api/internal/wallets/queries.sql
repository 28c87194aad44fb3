-- name: Balances :many
-- Every currency's wallet of the user, the most recently active first.
SELECT id, currency, balance, owed, updated_at FROM wallets_for_api
WHERE kind = 'user' AND owner = @owner
ORDER BY updated_at DESC, currency;

-- name: Entries :many
-- The wallet's latest entries, newest first.
SELECT t.id::text AS transaction_id, t.kind, t.reference, e.amount, e.currency, e.created_at
FROM ledger_entries_for_api e JOIN ledger_transactions_for_api t ON t.id = e.transaction_id
WHERE e.wallet_id = @wallet_id
ORDER BY e.id DESC
LIMIT @max_entries;
