SET lock_timeout = '5s';

DROP INDEX psp_reconciliation_runs_unalerted_idx;
CREATE INDEX psp_reconciliation_runs_unalerted_idx ON psp_reconciliation_runs (id)
    WHERE (disagreement_count > 0 OR status = 'failed') AND alerted_at IS NULL AND finished_at IS NOT NULL;
ALTER TABLE psp_reconciliation_runs
    DROP COLUMN disagreements_new,
    DROP COLUMN disagreements_open,
    DROP COLUMN disagreements_cleared;
DROP TABLE psp_disagreements;
