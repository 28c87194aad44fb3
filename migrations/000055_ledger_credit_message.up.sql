-- A credit's ledger transaction names the consumer message that posted it.
-- The credit path no longer writes a processed_events row beside its
-- posting: the unique (kind, reference) of the credit's ledger transaction
-- is the record that the payment was credited, and this column says which
-- message did it, so a redelivery of that message is told apart from
-- another event about the same payment (payout-worker's
-- internal/ledger, CreditClaim). NULL for every other kind, and for
-- credits posted before this column.
--
-- A nullable column without a default: a change of the catalog only, no
-- rewrite of the table, and no UPDATE (which the append-only trigger
-- would refuse).
SET lock_timeout = '5s';

ALTER TABLE ledger_transactions ADD COLUMN message_id text;
