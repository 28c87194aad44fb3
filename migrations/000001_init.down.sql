-- Reverses 000001 for tests; production migrations are forward-only.
DROP TABLE IF EXISTS audit_log;
DROP TABLE IF EXISTS dead_letters;
DROP TABLE IF EXISTS processed_events;
DROP TABLE IF EXISTS payout_transitions;
DROP TABLE IF EXISTS payouts;
DROP TABLE IF EXISTS ledger_entries;
DROP TABLE IF EXISTS ledger_transactions;
DROP TABLE IF EXISTS wallets;
DROP TABLE IF EXISTS transaction_outbox;
DROP TABLE IF EXISTS webhook_events;
DROP FUNCTION IF EXISTS ledger_forbid_change();
DROP FUNCTION IF EXISTS ledger_check_entry_currency();
DROP FUNCTION IF EXISTS ledger_check_transaction_balanced();
