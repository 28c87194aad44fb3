-- Each service connects as its own Postgres role with only the grants it
-- needs. docs/design/architecture.md ("Table ownership") is the table -> writer -> readers
-- list these grants follow; TestServiceRoleGrants (roles_test.go) holds the
-- same list in Go and fails when a table, a verb or a role differs from it.
--
-- The roles are NOLOGIN here. Roles are cluster-wide while a schema lives in
-- one database, and the migrator should not hold passwords: whoever deploys
-- turns a role into a login (`ALTER ROLE aegis_webhook_api LOGIN PASSWORD
-- ...`: docker-compose's db-roles service, docs/operations/deploy.md for Kubernetes,
-- trust auth and no password for make dev, e2e and chaos). The migrator keeps
-- owning every table.
--
-- Creation is idempotent and safe when many databases of one cluster migrate
-- at once (tests create a database per test): a role that exists is left as
-- it is, and a concurrent CREATE ROLE that loses the race (duplicate_object,
-- or unique_violation on pg_authid's name index) is taken as done. A role
-- that already exists needs no CREATEROLE from the migrator.
SET lock_timeout = '5s';

DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['aegis_webhook_api', 'aegis_outbox_relay', 'aegis_payout_worker', 'aegis_dlq_admin'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- another database's migration created it first
            END;
        END IF;
    END LOOP;
END
$$;

-- PUBLIC may not create objects in the schema (Postgres 15 and later already
-- say so; older clusters and upgraded ones do not): a service role that could
-- create a table or function could shadow ours. EXECUTE on functions stays
-- with PUBLIC: dead_letter_subject is pure and runs in dead_letters'
-- generated column for every writer of a letter, and trigger functions
-- cannot be called directly.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO aegis_webhook_api, aegis_outbox_relay, aegis_payout_worker, aegis_dlq_admin;

-- Cross-service writes (docs/design/architecture.md, "Writes across
-- services") are INSERT plus SELECT of the id column their RETURNING reads:
-- the outbox (pkg/outbox.Insert) and dead letters (pkg/dlq.Insert).

-- webhook-api: the inbox, PSP objects, destinations, the PSP reconciliation
-- it works, payout creation and cancel; reads balances and payout history.
GRANT SELECT, INSERT ON webhook_events TO aegis_webhook_api;
GRANT SELECT, INSERT, UPDATE ON psp_objects, destinations, psp_reconciliation_cursors,
    psp_reconciliation_runs, psp_disagreements, payouts TO aegis_webhook_api;
GRANT SELECT, INSERT ON payout_transitions TO aegis_webhook_api;
GRANT SELECT ON payout_attempts, payout_evidence, wallets, ledger_transactions, ledger_entries,
    payment_returns TO aegis_webhook_api;
GRANT INSERT, SELECT (id) ON transaction_outbox TO aegis_webhook_api;
GRANT INSERT, SELECT (id) ON dead_letters TO aegis_webhook_api;

-- outbox-relay: claims, settles and prunes the outbox; dead-letters what it
-- cannot publish.
GRANT SELECT, UPDATE, DELETE ON transaction_outbox TO aegis_outbox_relay;
GRANT INSERT, SELECT (id) ON dead_letters TO aegis_outbox_relay;

-- payout-worker: the payout state machine, PSP attempts and evidence, the
-- ledger, consumer idempotency; the verdict on operators' resolutions.
-- The ledger's append-only tables get no UPDATE: the database refuses to
-- change posted money for this role as well as by trigger.
GRANT SELECT, UPDATE ON payouts, payout_resolutions TO aegis_payout_worker;
GRANT SELECT, INSERT ON payout_transitions, payout_attempts, payout_evidence, ledger_transactions,
    ledger_entries, processed_events, credit_availability TO aegis_payout_worker;
GRANT SELECT, INSERT, UPDATE ON wallets, payment_returns TO aegis_payout_worker;
GRANT USAGE ON SEQUENCE payout_attempts_id_seq, payout_evidence_id_seq TO aegis_payout_worker;
GRANT INSERT, SELECT (id) ON transaction_outbox TO aegis_payout_worker;
GRANT INSERT, SELECT (id) ON dead_letters TO aegis_payout_worker;

-- dlq-admin: dead letters, replays, reconciliation, audit, approvals,
-- operators' resolutions, requests for PSP reconciliation runs; reads the
-- ledger, payouts and the outbox; replays write the outbox.
GRANT SELECT, INSERT, UPDATE ON dead_letters, replay_jobs, payout_resolutions, approvals,
    psp_reconciliation_runs TO aegis_dlq_admin;
GRANT SELECT, INSERT ON replay_job_letters, reconciliation_runs, audit_log TO aegis_dlq_admin;
GRANT SELECT, INSERT ON transaction_outbox TO aegis_dlq_admin;
GRANT SELECT ON payouts, payout_transitions, payout_attempts, payout_evidence, wallets,
    ledger_transactions, ledger_entries, psp_disagreements TO aegis_dlq_admin;
