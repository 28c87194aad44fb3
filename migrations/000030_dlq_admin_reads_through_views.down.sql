DROP VIEW payouts_for_ops, payout_transitions_for_ops, payout_attempts_for_ops, payout_evidence_for_ops,
    wallets_for_ops, ledger_transactions_for_ops, ledger_entries_for_ops, payment_returns_for_ops,
    psp_disagreements_for_ops;
