-- dlq-admin reads the tables other services write only through these views,
-- each with the columns dlq-admin's queries need, and holds SELECT on the
-- views, not the tables: a writer may change a table's other columns
-- without dlq-admin noticing, and dlq-admin sees nothing it has no use
-- for (a payout's idempotency key, request hash and PSP key; a ledger
-- entry's metadata). This migration is the expand step: the previous
-- release reads the tables during the rollout, so its table grants stay;
-- the next release's contract migration revokes them (docs/operations/
-- deploy.md, "Pending contract"; migrations/contract.go,
-- ContractNext). The views are simple, so the planner inlines them:
-- every index (and every partial index's predicate) of the table serves a
-- query on its view as before. They belong to the migrator, which owns the
-- tables, so a view's reader needs no grant on its table.
--
-- Named <table>_for_ops: ops is dlq-admin, the operators' service.

-- payout-worker's payouts (created and cancelled by webhook-api): the
-- console, the payouts list, a resolution's checks, replay's no-op
-- decision and the ledger check's holds.
CREATE VIEW payouts_for_ops AS
SELECT id, user_id, amount, currency, provider, destination, destination_id, status, attempts,
       psp_reference, psp_status, last_error, error_class, correlation_id, created_at, updated_at
FROM payouts;

-- A payout's history and PSP calls, as the console shows them.
CREATE VIEW payout_transitions_for_ops AS
SELECT id, payout_id, from_status, to_status, attempt, error, error_class, at
FROM payout_transitions;

CREATE VIEW payout_attempts_for_ops AS
SELECT id, payout_id, attempt, kind, outcome, psp_reference, error, at
FROM payout_attempts;

-- Which PSP event was applied to which payout (replay's no-op decision).
CREATE VIEW payout_evidence_for_ops AS
SELECT payout_id, provider, event_id, verdict
FROM payout_evidence;

-- The ledger, as the integrity check and replay's no-op decision read it.
CREATE VIEW wallets_for_ops AS
SELECT id, kind, owner, currency, balance, owed
FROM wallets;

CREATE VIEW ledger_transactions_for_ops AS
SELECT id, kind, reference
FROM ledger_transactions;

CREATE VIEW ledger_entries_for_ops AS
SELECT transaction_id, wallet_id, amount, currency
FROM ledger_entries;

-- Refunds and disputes: the disputes and receivables accounts' share.
CREATE VIEW payment_returns_for_ops AS
SELECT provider, object_id, kind, user_id, amount, currency, state
FROM payment_returns;

-- webhook-api's PSP/ledger disagreements, as the console and the PSP-run
-- alerts show them.
CREATE VIEW psp_disagreements_for_ops AS
SELECT id, provider, kind, payout_id, psp_object_id, psp_status, ledger_status, detail,
       first_seen_run, first_seen_at, last_seen_run, last_seen_at, cleared_run, cleared_at
FROM psp_disagreements;

GRANT SELECT ON payouts_for_ops, payout_transitions_for_ops, payout_attempts_for_ops, payout_evidence_for_ops,
    wallets_for_ops, ledger_transactions_for_ops, ledger_entries_for_ops, payment_returns_for_ops,
    psp_disagreements_for_ops TO aegis_dlq_admin;
