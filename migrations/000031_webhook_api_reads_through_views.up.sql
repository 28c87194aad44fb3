-- webhook-api reads payout-worker's tables only through these views, each
-- with the columns its queries need (as dlq-admin does, 000030), and holds
-- SELECT on the views; its table grants stay for the previous release's
-- pods during the rollout and go in the next release's contract migration
-- (as 000030's). Simple views: the planner inlines
-- them and the tables' indexes serve them.
--
-- Named <table>_for_api: api is webhook-api, the clients' and PSPs' front
-- door.

-- A payout's PSP calls and the PSP's word on it (GET /v1/payouts/{id}).
CREATE VIEW payout_attempts_for_api AS
SELECT id, payout_id, attempt, kind, idempotency_key, outcome, psp_reference, error, at
FROM payout_attempts;

CREATE VIEW payout_evidence_for_api AS
SELECT id, payout_id, provider, event_id, event_type, amount, currency, psp_reference, verdict, reason, at
FROM payout_evidence;

-- Balances and recent entries (GET /v1/wallets), and the wallet a payment
-- was credited to (ingest: the partition of its refunds and disputes).
CREATE VIEW wallets_for_api AS
SELECT id, kind, owner, currency, balance, owed, updated_at
FROM wallets;

CREATE VIEW ledger_transactions_for_api AS
SELECT id, kind, reference
FROM ledger_transactions;

CREATE VIEW ledger_entries_for_api AS
SELECT id, transaction_id, wallet_id, amount, currency, created_at
FROM ledger_entries;

-- Whether a refund or dispute is posted (the PSP reconciliation).
CREATE VIEW payment_returns_for_api AS
SELECT provider, kind, object_id
FROM payment_returns;

GRANT SELECT ON payout_attempts_for_api, payout_evidence_for_api, wallets_for_api, ledger_transactions_for_api,
    ledger_entries_for_api, payment_returns_for_api TO aegis_webhook_api;
