-- The sweeper finds the payouts past their state's deadline, and the gauge
-- of the oldest unfinished payout per state reads min(status_since), once
-- per state per sweep: both are a range scan of this index. Only
-- unfinished payouts are indexed.
--
-- CONCURRENTLY, so that payouts keep being written while the index is
-- built; it cannot run in a transaction, so this file holds this one
-- statement.
CREATE INDEX CONCURRENTLY payouts_status_since_idx
    ON payouts (status, status_since) WHERE status NOT IN ('SUCCEEDED', 'FINALIZED');
