SET lock_timeout = '5s';

DROP TABLE IF EXISTS psp_reconciliation_cursors;
DROP TABLE IF EXISTS psp_reconciliation_runs;
