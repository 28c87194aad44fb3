-- Back to 000044's partition policies: daily partitions only. A scaled
-- policy cannot be kept (its stored retention and horizon are below the
-- daily floors): it is set back to its values times its scale first.
SET lock_timeout = '5s';

DROP FUNCTION IF EXISTS rescale_partitions(text, integer);
UPDATE partition_policies
SET retention = retention * time_scale, dedupe_horizon = dedupe_horizon * time_scale, time_scale = 1
WHERE time_scale <> 1;
DROP FUNCTION IF EXISTS partition_status();
DROP FUNCTION IF EXISTS maintain_partitions(text);

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

DROP FUNCTION IF EXISTS partition_width(integer);
ALTER TABLE partition_policies
    DROP CONSTRAINT partition_policies_dedupe_horizon_check,
    DROP CONSTRAINT partition_policies_retention_outlasts_horizon,
    DROP CONSTRAINT partition_policies_retention_check;
ALTER TABLE partition_policies DROP COLUMN time_scale;
ALTER TABLE partition_policies
    ADD CONSTRAINT partition_policies_dedupe_horizon_check CHECK (dedupe_horizon >= interval '7 days'),
    ADD CONSTRAINT partition_policies_check1 CHECK (retention > coalesce(dedupe_horizon, interval '0') + interval '1 day'),
    ADD CONSTRAINT partition_policies_retention_check CHECK (retention >= interval '2 days');
