-- Retention by time partition (docs/design/data-lifecycle.md). A table
-- kept this way is partitioned by day on a timestamptz column and listed
-- in partition_policies: how many days of partitions exist ahead of today,
-- how long a partition is kept (it is dropped once wholly older than that)
-- and, for a table whose dedupe key is not unique across partitions, how
-- far back a duplicate is looked for.
--
-- The services' roles have DML only. maintain_partitions, SECURITY DEFINER
-- and owned by the schema owner, is the only DDL they may cause: it
-- touches only a table listed here and refuses any other. Every webhook-api
-- replica queues the job that calls it (pkg/partition); partition_status
-- is what the gauges read.
SET lock_timeout = '5s';

CREATE TABLE partition_policies (
    table_name     text     PRIMARY KEY,
    -- The partition key (a timestamptz column of table_name).
    column_name    text     NOT NULL,
    -- Days of partitions kept ahead of today (UTC). A row with no partition
    -- fails its INSERT loudly (there is no DEFAULT partition): webhook
    -- ingest answers 5xx and the PSP retries. Two weeks gives the job, run
    -- hourly, and the alert (AegisPartitionsAheadShort, at 7 days) room.
    premake_days   integer  NOT NULL DEFAULT 14 CHECK (premake_days BETWEEN 2 AND 90),
    -- A partition whose upper bound is older than now() - retention is
    -- dropped whole.
    retention      interval NOT NULL,
    -- The dedupe horizon: a key seen within it is a duplicate. Stripe
    -- retries a webhook for up to 3 days and the PSP reconciliation reads
    -- at most PSP_RECONCILE_WINDOW (24 h) back: 7 days is the floor.
    dedupe_horizon interval CHECK (dedupe_horizon >= interval '7 days'),
    -- The table of the dedupe's keys (one unpartitioned row per key with
    -- its time, under a real unique constraint), trimmed by
    -- maintain_partitions of the keys older than the horizon and a day.
    key_table      text,
    CHECK ((key_table IS NULL) = (dedupe_horizon IS NULL)),
    -- Retention must outlast the horizon, or a partition still looked in
    -- for duplicates could be dropped.
    CHECK (retention > coalesce(dedupe_horizon, interval '0') + interval '1 day'),
    CHECK (retention >= interval '2 days')
);

-- partition_bounds: the partitions of parent with their bounds (lo NULL for
-- MINVALUE), read from the catalog. Range partitions on one timestamptz
-- column only, which is all partition_policies admits.
CREATE FUNCTION partition_bounds(parent regclass)
RETURNS TABLE (part regclass, lo timestamptz, hi timestamptz)
LANGUAGE sql STABLE SET search_path = public, pg_temp AS $$
    SELECT c.oid::regclass,
           CASE WHEN m[1] = 'MINVALUE' THEN NULL ELSE btrim(m[1], '''')::timestamptz END,
           CASE WHEN m[2] = 'MAXVALUE' THEN NULL ELSE btrim(m[2], '''')::timestamptz END
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \((.*)\) TO \((.*)\)') AS m
    WHERE i.inhparent = parent
$$;
REVOKE EXECUTE ON FUNCTION partition_bounds(regclass) FROM PUBLIC;

-- maintain_partitions creates the partitions of p_table from the end of
-- its newest up to premake_days ahead of today, drops every partition
-- whose upper bound is older than now() - retention, and deletes the dedupe
-- keys older than the horizon and a day (at most 100 000 a call, in batches
-- of 10 000). Only a table listed in partition_policies; one caller per
-- table at a time (an advisory lock). A table not partitioned yet (before
-- the migration that partitions it) only has its keys trimmed.
--
-- Locks: a new partition is created on its own (CREATE TABLE ... LIKE: an
-- ACCESS SHARE of the parent) and then ATTACHed, which takes SHARE UPDATE
-- EXCLUSIVE on the parent, so inserts and reads go on (CREATE TABLE ...
-- PARTITION OF would take ACCESS EXCLUSIVE). Dropping a partition takes
-- ACCESS EXCLUSIVE on the parent (DETACH CONCURRENTLY cannot run in a
-- function): each drop waits at most 200 ms for it, so inserts queue behind
-- it no longer than that, and a drop that did not get the lock is counted
-- as skipped and tried again at the next run (AegisPartitionRetentionBehind
-- pages if that keeps happening).
CREATE FUNCTION maintain_partitions(p_table text)
RETURNS TABLE (created integer, dropped integer, skipped integer, keys_trimmed integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
    pol   partition_policies;
    today timestamptz := date_trunc('day', now(), 'UTC');
    upto  timestamptz;
    day   timestamptz;
    hi    timestamptz;
    r     record;
    name  text;
    n     integer;
BEGIN
    created := 0; dropped := 0; skipped := 0; keys_trimmed := 0;
    SELECT * INTO pol FROM partition_policies WHERE table_name = p_table;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'maintain_partitions: % has no partition policy', p_table
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM pg_advisory_xact_lock(1701002, hashtext(p_table));

    IF pol.key_table IS NOT NULL THEN
        LOOP
            EXECUTE format('DELETE FROM %I WHERE ctid = ANY (ARRAY (SELECT ctid FROM %I WHERE %I < $1 LIMIT 10000))',
                           pol.key_table, pol.key_table, pol.column_name)
                USING now() - pol.dedupe_horizon - interval '1 day';
            GET DIAGNOSTICS n = ROW_COUNT;
            keys_trimmed := keys_trimmed + n;
            EXIT WHEN n < 10000 OR keys_trimmed >= 100000;
        END LOOP;
    END IF;
    IF (SELECT c.relkind FROM pg_class c WHERE c.oid = p_table::regclass) <> 'p' THEN
        RETURN NEXT;
        RETURN;
    END IF;

    upto := today + make_interval(days => pol.premake_days + 1);
    SELECT max(b.hi) INTO hi FROM partition_bounds(p_table::regclass) b;
    day := greatest(coalesce(hi, today), today);
    WHILE day < upto LOOP
        name := format('%s_p%s', p_table, to_char(day AT TIME ZONE 'UTC', 'YYYYMMDD'));
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name, p_table);
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                       p_table, name, day, day + interval '1 day');
        created := created + 1;
        day := day + interval '1 day';
    END LOOP;

    FOR r IN SELECT b.part FROM partition_bounds(p_table::regclass) b
             WHERE b.hi IS NOT NULL AND b.hi <= now() - pol.retention ORDER BY b.hi LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '200ms', true);
            EXECUTE format('DROP TABLE %s', r.part);
            dropped := dropped + 1;
        EXCEPTION WHEN lock_not_available THEN
            skipped := skipped + 1;
        END;
    END LOOP;
    RETURN NEXT;
END
$$;
REVOKE EXECUTE ON FUNCTION maintain_partitions(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION maintain_partitions(text) TO aegis_webhook_api;

-- partition_status: per table of partition_policies, how far ahead of now
-- its partitions reach, and how long its oldest partition has been past
-- its retention (0 when none is): the gauges of AegisPartitionsAheadShort
-- and AegisPartitionRetentionBehind. A table not partitioned yet has no
-- line. premake and retention are exported
-- beside them for the runbooks.
CREATE FUNCTION partition_status()
RETURNS TABLE (table_name text, ahead_seconds double precision, overdue_seconds double precision,
               retention_seconds double precision, partitions integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT p.table_name,
           coalesce(extract(epoch FROM max(b.hi) - now()), 0)::float8,
           coalesce(extract(epoch FROM greatest(now() - p.retention - min(b.hi), interval '0')), 0)::float8,
           extract(epoch FROM p.retention)::float8,
           count(b.part)::int
    FROM partition_policies p
    JOIN pg_class c ON c.oid = p.table_name::regclass AND c.relkind = 'p'
    LEFT JOIN LATERAL partition_bounds(p.table_name::regclass) b ON true
    GROUP BY p.table_name, p.retention
    ORDER BY p.table_name
$$;
REVOKE EXECUTE ON FUNCTION partition_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION partition_status() TO aegis_webhook_api;

-- webhook_events_all_inserted raises the unique violation a multi-row
-- insert of want events would have met with a unique constraint when only
-- got were inserted (000056's dedupe trigger skipped a duplicate): that
-- statement must abort its pipelined transaction rather than commit the
-- others' outbox rows alone. Created ahead of 000056 so that ingest's
-- queries run on the table before and after it is partitioned.
CREATE FUNCTION webhook_events_all_inserted(want bigint, got bigint) RETURNS boolean
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
BEGIN
    IF got < want THEN
        RAISE EXCEPTION 'duplicate key value violates unique constraint "webhook_events_provider_event_id_key"'
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'webhook_events_provider_event_id_key', TABLE = 'webhook_events',
                  DETAIL = format('%s of %s events were already stored', want - got, want);
    END IF;
    RETURN true;
END
$$;

-- webhook_events' policy: 14 days of partitions ahead; kept 90 days, the
-- evidence of what the ledger posted for a quarter (the ledger itself is
-- kept for good); a duplicate is looked for 7 days back (the floor: well
-- past Stripe's 3 days of retries and the PSP reconciliation's 24 h
-- window). 000045 to 000048 and 000056 partition the table.
INSERT INTO partition_policies (table_name, column_name, premake_days, retention, dedupe_horizon, key_table)
VALUES ('webhook_events', 'received_at', 14, interval '90 days', interval '7 days', 'webhook_event_keys');

-- webhook_event_keys: webhook_events' dedupe keys of the horizon, one row
-- per (provider, event_id) under a real primary key, which no partitioned
-- table can have without its partition key. The dedupe (000056's trigger)
-- is one INSERT ... ON CONFLICT here: a key inserted by a concurrent
-- transaction makes it wait for that one's end, as a unique index does,
-- and then see its committed row. Looking for the key in the partitions
-- themselves would lock every partition of the table at each insert
-- (PostgreSQL 15 locks all partitions of a generic plan before pruning):
-- measured 1.9 ms a row with 89 partitions. Written only by the triggers
-- (SECURITY DEFINER) and trimmed by maintain_partitions: no role's grant.
CREATE TABLE webhook_event_keys (
    provider    text        NOT NULL,
    event_id    text        NOT NULL,
    received_at timestamptz NOT NULL,
    PRIMARY KEY (provider, event_id)
);
CREATE INDEX webhook_event_keys_received_at_idx ON webhook_event_keys (received_at);
