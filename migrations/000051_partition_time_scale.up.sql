-- A partition policy's time scale (docs/design/data-lifecycle.md, "Time
-- scale"). A soak or a test must see partitions made and dropped within
-- minutes, through the same maintain_partitions a deployment runs, so a
-- policy's time can be compressed: with time_scale N a partition spans a
-- day / N, premake_days are days / N, and retention and dedupe_horizon are
-- stored already divided by N (the dedupe trigger and the drops read them
-- as they are). The floors the CHECKs keep (a 7-day horizon, a retention a
-- day past it) hold on the values times N, so a scaled policy is the
-- default one compressed, never a weaker one. A deployment keeps
-- time_scale 1: every keeper exports it (aegis_partition_time_scale) and
-- AegisPartitionPolicyScaled pages when it is not.
--
-- rescale_partitions is how a policy gets scaled: owner only (no grant),
-- and only on an empty table, whose partitions it replaces.
SET lock_timeout = '5s';

ALTER TABLE partition_policies
    ADD COLUMN time_scale integer NOT NULL DEFAULT 1 CHECK (time_scale BETWEEN 1 AND 86400);
ALTER TABLE partition_policies DROP CONSTRAINT partition_policies_dedupe_horizon_check;
ALTER TABLE partition_policies DROP CONSTRAINT partition_policies_check1;
ALTER TABLE partition_policies DROP CONSTRAINT partition_policies_retention_check;
ALTER TABLE partition_policies
    ADD CONSTRAINT partition_policies_dedupe_horizon_check CHECK (dedupe_horizon * time_scale >= interval '7 days'),
    ADD CONSTRAINT partition_policies_retention_outlasts_horizon
        CHECK ((retention - coalesce(dedupe_horizon, interval '0')) * time_scale > interval '1 day'),
    ADD CONSTRAINT partition_policies_retention_check CHECK (retention * time_scale >= interval '2 days');

-- partition_width is a policy's partition span: a day, divided by its time
-- scale.
CREATE FUNCTION partition_width(time_scale integer) RETURNS interval
LANGUAGE sql IMMUTABLE AS $$ SELECT interval '1 day' / time_scale $$;

-- maintain_partitions as in 000044, at the policy's time scale: partitions
-- of partition_width aligned on it, named by their start (to the second
-- when narrower than a day), made premake_days widths ahead, and dedupe
-- keys trimmed past the horizon and one width. It also returns the time
-- scale, which the keeper runs by and exports.
DROP FUNCTION maintain_partitions(text);
CREATE FUNCTION maintain_partitions(p_table text)
RETURNS TABLE (created integer, dropped integer, skipped integer, keys_trimmed integer, time_scale integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
    pol   partition_policies;
    width interval;
    today timestamptz;
    upto  timestamptz;
    day   timestamptz;
    hi    timestamptz;
    r     record;
    name  text;
    n     integer;
BEGIN
    created := 0; dropped := 0; skipped := 0; keys_trimmed := 0;
    SELECT * INTO pol FROM partition_policies p WHERE p.table_name = p_table;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'maintain_partitions: % has no partition policy', p_table
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    time_scale := pol.time_scale;
    width := partition_width(pol.time_scale);
    today := date_bin(width, now(), timestamptz '2000-01-01 00:00:00+00');
    PERFORM pg_advisory_xact_lock(1701002, hashtext(p_table));

    IF pol.key_table IS NOT NULL THEN
        LOOP
            EXECUTE format('DELETE FROM %I WHERE ctid = ANY (ARRAY (SELECT ctid FROM %I WHERE %I < $1 LIMIT 10000))',
                           pol.key_table, pol.key_table, pol.column_name)
                USING now() - pol.dedupe_horizon - width;
            GET DIAGNOSTICS n = ROW_COUNT;
            keys_trimmed := keys_trimmed + n;
            EXIT WHEN n < 10000 OR keys_trimmed >= 100000;
        END LOOP;
    END IF;
    IF (SELECT c.relkind FROM pg_class c WHERE c.oid = p_table::regclass) <> 'p' THEN
        RETURN NEXT;
        RETURN;
    END IF;

    upto := today + width * (pol.premake_days + 1);
    SELECT max(b.hi) INTO hi FROM partition_bounds(p_table::regclass) b;
    day := greatest(coalesce(hi, today), today);
    WHILE day < upto LOOP
        name := format('%s_p%s', p_table, to_char(day AT TIME ZONE 'UTC',
                       CASE WHEN pol.time_scale = 1 THEN 'YYYYMMDD' ELSE 'YYYYMMDD"_"HH24MISS' END));
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name, p_table);
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                       p_table, name, day, day + width);
        created := created + 1;
        day := day + width;
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

-- partition_status as in 000044, with the policy's time scale.
DROP FUNCTION partition_status();
CREATE FUNCTION partition_status()
RETURNS TABLE (table_name text, ahead_seconds double precision, overdue_seconds double precision,
               retention_seconds double precision, partitions integer, time_scale integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT p.table_name,
           coalesce(extract(epoch FROM max(b.hi) - now()), 0)::float8,
           coalesce(extract(epoch FROM greatest(now() - p.retention - min(b.hi), interval '0')), 0)::float8,
           extract(epoch FROM p.retention)::float8,
           count(b.part)::int,
           p.time_scale
    FROM partition_policies p
    JOIN pg_class c ON c.oid = p.table_name::regclass AND c.relkind = 'p'
    LEFT JOIN LATERAL partition_bounds(p.table_name::regclass) b ON true
    GROUP BY p.table_name, p.retention, p.time_scale
    ORDER BY p.table_name
$$;
REVOKE EXECUTE ON FUNCTION partition_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION partition_status() TO aegis_webhook_api;

-- rescale_partitions sets p_table's time scale: its retention and dedupe
-- horizon are rescaled with it, its partitions (all empty) dropped and
-- made again at the new width, and its dedupe keys (of no row) deleted.
-- It refuses a table holding a row: it is for a database made for a soak
-- or a test. Owner only.
CREATE FUNCTION rescale_partitions(p_table text, p_time_scale integer) RETURNS integer
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
DECLARE
    pol  partition_policies;
    r    record;
    held boolean;
    made integer;
BEGIN
    SELECT * INTO pol FROM partition_policies p WHERE p.table_name = p_table FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'rescale_partitions: % has no partition policy', p_table;
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I)', p_table) INTO held;
    IF held THEN
        RAISE EXCEPTION 'rescale_partitions: % holds rows; only an empty table is rescaled (a database made for a soak or a test)', p_table;
    END IF;
    UPDATE partition_policies p
    SET time_scale = p_time_scale,
        retention = p.retention * p.time_scale / p_time_scale,
        dedupe_horizon = p.dedupe_horizon * p.time_scale / p_time_scale
    WHERE p.table_name = p_table;
    IF pol.key_table IS NOT NULL THEN
        EXECUTE format('DELETE FROM %I', pol.key_table);
    END IF;
    IF (SELECT c.relkind FROM pg_class c WHERE c.oid = p_table::regclass) <> 'p' THEN
        RETURN 0;
    END IF;
    FOR r IN SELECT b.part FROM partition_bounds(p_table::regclass) b LOOP
        EXECUTE format('DROP TABLE %s', r.part);
    END LOOP;
    SELECT m.created INTO made FROM maintain_partitions(p_table) m;
    RETURN made;
END
$$;
REVOKE EXECUTE ON FUNCTION rescale_partitions(text, integer) FROM PUBLIC;
