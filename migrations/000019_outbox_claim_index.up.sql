-- The relay's claim walks the unfinished rows in id order, and looks each
-- key's first unfinished row up in transaction_outbox_unfinished_key_idx.
-- Both partial indexes had the predicate finished_at IS NULL, so both served
-- both look-ups, and the planner chose by their statistics: after a VACUUM
-- of an empty queue (the partial indexes' tuple count 0) it saw the id
-- index as free and read the whole backlog through it for every key
-- look-up (5 s per claim on a 20k-row backlog instead of 0.1 s). This index
-- adds id > 0 (always true) to the predicate: the claim's walk states it,
-- the key look-ups do not, so only the walk can use it (pkg/outbox,
-- queries.sql). 000020 drops the old index once this one is valid.
--
-- CONCURRENTLY, so that ingest keeps writing while the index is built; it
-- cannot run in a transaction, so this file holds this one statement.
CREATE INDEX CONCURRENTLY transaction_outbox_claim_idx
    ON transaction_outbox (id) WHERE finished_at IS NULL AND id > 0;
