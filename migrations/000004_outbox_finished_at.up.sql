-- The relay claims a row (pending -> processing) and then settles it
-- (processed or dlq). The partial indexes that serve the claim used to be
-- defined on status, which made every claim a non-HOT update: a new tuple
-- version with its payload, and new entries in every index. Keyed on
-- finished_at instead — set once, when a row is processed or dead-lettered —
-- the claim changes no indexed column and, with free space left on each page
-- (fillfactor), Postgres updates the row in place (HOT).
SET lock_timeout = '5s';

ALTER TABLE transaction_outbox ADD COLUMN finished_at timestamptz;
UPDATE transaction_outbox SET finished_at = coalesce(processed_at, updated_at)
WHERE status IN ('processed', 'dlq');

DROP INDEX transaction_outbox_unfinished_idx;
DROP INDEX transaction_outbox_unfinished_key_idx;
DROP INDEX transaction_outbox_processed_idx;

CREATE INDEX transaction_outbox_unfinished_idx
    ON transaction_outbox (id) WHERE finished_at IS NULL;
CREATE INDEX transaction_outbox_unfinished_key_idx
    ON transaction_outbox (partition_key, id) WHERE finished_at IS NULL;
-- Serves retention.
CREATE INDEX transaction_outbox_finished_idx
    ON transaction_outbox (finished_at) WHERE finished_at IS NOT NULL;

ALTER TABLE transaction_outbox ADD CONSTRAINT transaction_outbox_finished
    CHECK ((finished_at IS NULL) = (status IN ('pending', 'processing', 'failed')));

-- A queue table churns: every row is updated twice and deleted within a day.
-- Room on each page for in-place updates, and vacuum early and without
-- throttling, so dead versions do not pile up in the claim's index scans.
ALTER TABLE transaction_outbox SET (
    fillfactor = 60,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);
