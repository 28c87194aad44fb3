-- psp_reconciliation_runs gets one writer, webhook-api (docs/design/
-- architecture.md, "Table ownership"). What dlq-admin did to the table
-- becomes:
--
-- * a requested run and the end of an orphaned one: functions of
--   webhook-api's (request_psp_reconciliation_run, end_orphaned_psp_run),
--   SECURITY DEFINER, owned by the schema owner with search_path pinned,
--   called in the caller's transaction (dlq-admin's request also inserts
--   the River job and the audit row there). They hold the same checks the
--   statements they replace did: one run requested or running at a time
--   (the partial unique index psp_reconciliation_runs_one_active: a second
--   request is a unique violation, the API's 409) and only a run still
--   requested or running is ended. Whether a run is orphaned is River's to
--   say: its caller asks River's client for the run's own job in the same
--   transaction first (pkg/jobs.EndOrphanedPSPRun); no statement of ours
--   names River's tables. webhook-api's schedule ends an orphaned run the
--   same way, so it may call end_orphaned_psp_run too.
-- * alerted_at: dlq-admin's own table, psp_run_alerts. A replica claims a
--   run by inserting its row (INSERT ... ON CONFLICT DO NOTHING): the row,
--   uncommitted, holds off every other replica's claim until the alert is
--   raised and committed (a reader of a view cannot lock the run's row
--   with FOR UPDATE SKIP LOCKED). Runs alerted on before this migration
--   are copied in.
-- * reads: through psp_reconciliation_runs_for_ops.
--
-- Expand only: the previous release's dlq-admin inserts runs, sets
-- alerted_at and ends orphaned runs on the table during the rollout, so its
-- grants stay; the next release revokes them (docs/operations/deploy.md,
-- "Pending contract"). Until then the two releases' watchers must not both
-- alert on a run: a claim sets the run's alerted_at (the previous release's
-- mark) under the run's row lock, and is refused when it is set already
-- (psp_run_alerts_bridge below, dropped by the contract).
SET lock_timeout = '5s';

CREATE FUNCTION request_psp_reconciliation_run(actor text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    run bigint;
BEGIN
    IF coalesce(btrim(actor), '') = '' THEN
        RAISE EXCEPTION 'a requested PSP reconciliation run names who requested it'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO psp_reconciliation_runs (trigger, requested_by) VALUES ('manual', actor) RETURNING id INTO run;
    RETURN run;
END
$$;

-- Ends run_id as failed with why if it is still requested or running;
-- returns its id, or NULL when it is not (it finished, or no such run).
CREATE FUNCTION end_orphaned_psp_run(run_id bigint, why text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    ended bigint;
BEGIN
    IF coalesce(btrim(why), '') = '' THEN
        RAISE EXCEPTION 'an ended PSP reconciliation run says why' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE psp_reconciliation_runs r
    SET status = 'failed', finished_at = now(), locked_by = NULL, lease_until = NULL, error = why
    WHERE r.id = run_id AND r.status IN ('requested', 'running')
    RETURNING r.id INTO ended;
    RETURN ended;
END
$$;

-- Functions are executable by PUBLIC unless revoked.
REVOKE EXECUTE ON FUNCTION request_psp_reconciliation_run(text), end_orphaned_psp_run(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION request_psp_reconciliation_run(text) TO aegis_dlq_admin;
GRANT EXECUTE ON FUNCTION end_orphaned_psp_run(bigint, text) TO aegis_dlq_admin, aegis_webhook_api;

-- The runs as dlq-admin (the API, the alerts) and pkg/jobs (the active run)
-- read them. alerted_at is the previous release's mark, read until the
-- contract so that a run it alerted on is not alerted on again. A simple
-- view: the table's indexes serve it.
CREATE VIEW psp_reconciliation_runs_for_ops AS
SELECT id, status, trigger, requested_by, requested_at, started_at, finished_at, attempts,
       events_found, events_recovered, events_present, disagreement_count, report, disagreements, error,
       disagreements_new, disagreements_open, disagreements_cleared, alerted_at
FROM psp_reconciliation_runs;

GRANT SELECT ON psp_reconciliation_runs_for_ops TO aegis_dlq_admin, aegis_webhook_api;

-- dlq-admin's: the runs it has alerted on, one row per run, never changed.
CREATE TABLE psp_run_alerts (
    run_id     bigint      PRIMARY KEY REFERENCES psp_reconciliation_runs (id),
    alerted_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO psp_run_alerts (run_id, alerted_at)
SELECT id, alerted_at FROM psp_reconciliation_runs WHERE alerted_at IS NOT NULL;

GRANT SELECT, INSERT ON psp_run_alerts TO aegis_dlq_admin;

-- The rollout's bridge between the two releases' watchers: a claim marks the
-- run alerted_at as the previous release does, under the run's row lock,
-- and is skipped (no row, nothing RETURNING) when the run is marked
-- already: by the previous release, or by a claim that committed while
-- this one waited for the lock. SECURITY DEFINER: it writes the table for
-- dlq-admin, whose UPDATE on it the contract revokes with this trigger.
CREATE FUNCTION psp_run_alerts_bridge() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    UPDATE psp_reconciliation_runs SET alerted_at = NEW.alerted_at WHERE id = NEW.run_id AND alerted_at IS NULL;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;
REVOKE EXECUTE ON FUNCTION psp_run_alerts_bridge() FROM PUBLIC;

CREATE TRIGGER psp_run_alerts_bridge BEFORE INSERT ON psp_run_alerts
    FOR EACH ROW EXECUTE FUNCTION psp_run_alerts_bridge();
