-- Takes back every grant of 000016 in this database. The roles stay: they
-- are cluster-wide, and other databases of the cluster (every test database,
-- a staging copy) may still hold grants to them, which DROP ROLE refuses.
-- Dropping them is by hand, once no database uses them: DROP OWNED BY in
-- each database, then DROP ROLE. CREATE on the schema public stays revoked
-- from PUBLIC (Postgres 15's own default).
SET lock_timeout = '5s';

DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['aegis_webhook_api', 'aegis_outbox_relay', 'aegis_payout_worker', 'aegis_dlq_admin'] LOOP
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA public FROM %I', r);
            EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM %I', r);
            EXECUTE format('REVOKE USAGE ON SCHEMA public FROM %I', r);
        END IF;
    END LOOP;
END
$$;
