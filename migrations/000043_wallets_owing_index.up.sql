-- aegis_receivables_open (AegisReceivableOpen) counts, at every scrape on
-- every payout-worker replica, the user wallets that owe money: a range
-- scan of this index instead of a walk of every wallet. Few wallets ever
-- owe, so the index stays small.
--
-- CONCURRENTLY, so that credits keep being written while the index is
-- built; it cannot run in a transaction, so this file holds this one
-- statement.
CREATE INDEX CONCURRENTLY wallets_owing_idx ON wallets (currency) WHERE kind = 'user' AND owed > 0;
