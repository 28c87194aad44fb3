DROP TRIGGER psp_run_alerts_bridge ON psp_run_alerts;
DROP FUNCTION psp_run_alerts_bridge();
-- The bridge kept the runs' alerted_at current: nothing to copy back.
DROP TABLE psp_run_alerts;
DROP VIEW psp_reconciliation_runs_for_ops;
DROP FUNCTION request_psp_reconciliation_run(text), end_orphaned_psp_run(bigint, text);
