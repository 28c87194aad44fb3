DROP VIEW payout_attempts_for_api, payout_evidence_for_api, wallets_for_api, ledger_transactions_for_api,
    ledger_entries_for_api, payment_returns_for_api;
