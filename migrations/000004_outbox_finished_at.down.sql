ALTER TABLE transaction_outbox RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_delay);
ALTER TABLE transaction_outbox DROP CONSTRAINT transaction_outbox_finished;
DROP INDEX transaction_outbox_finished_idx;
DROP INDEX transaction_outbox_unfinished_key_idx;
DROP INDEX transaction_outbox_unfinished_idx;
CREATE INDEX transaction_outbox_unfinished_idx
    ON transaction_outbox (id) WHERE status IN ('pending', 'processing', 'failed');
CREATE INDEX transaction_outbox_unfinished_key_idx
    ON transaction_outbox (partition_key, id) WHERE status IN ('pending', 'processing', 'failed');
CREATE INDEX transaction_outbox_processed_idx
    ON transaction_outbox (processed_at) WHERE status = 'processed';
ALTER TABLE transaction_outbox DROP COLUMN finished_at;
