CREATE INDEX CONCURRENTLY IF NOT EXISTS transaction_outbox_unfinished_idx
    ON transaction_outbox (id) WHERE finished_at IS NULL;
