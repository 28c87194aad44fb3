DROP VIEW payout_attempts_for_api, payout_evidence_for_api, wallets_for_api, ledger_transactions_for_api,
    ledger_entries_for_api, payment_returns_for_api;
GRANT SELECT ON payout_attempts, payout_evidence, wallets, ledger_transactions, ledger_entries, payment_returns
    TO aegis_webhook_api;
